// Package statuspage renders the controllers' read-only status page: the
// queue, the nodes and their states, one job's details and why it waits,
// and the usage plot (package accounting/usageplot draws it). Its pages
// are server-rendered HTML from html/template, which escapes every value
// (a job named <script>…</script> shows as text); they carry no script at
// all, so the controller serves them under a Content-Security-Policy that
// allows none.
//
// The package renders what it is given: the controller (ctld/ui.go)
// gathers the rows under the API's access rules and hands them over. It
// never reads the state, the clock or the network.
//
// Entry points: Overview, Job, Error (each writes a whole page) and
// ContentSecurityPolicy.
package statuspage
