// Package usageplot draws a usage series (api.AcctSeries, from GET
// /v1/accounting/series) as one SVG image of two panels: the usage over
// time as bars stacked by account, and the distribution of the jobs'
// waits. `corral acct report --svg FILE` writes it; the controllers' status
// page serves it.
//
// It draws with gonum.org/v1/plot (its vgsvg canvas), never by writing SVG
// by hand: axes, ticks, legend and text escaping are the library's. It
// never does I/O beyond the io.Writer it is given and reads no clock.
//
// Entry point: SVG. Accounts beyond the MaxAccounts largest are drawn
// together as "(other)", so that the legend stays readable; a job charged
// to no account shows as "(none)".
package usageplot
