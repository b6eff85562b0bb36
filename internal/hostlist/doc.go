// Package hostlist reads and writes Slurm's host list syntax, the way node
// names travel between people, scripts and the scheduler: "n[1-4,7]",
// "gpu[01-02]", "rack[1-2]-n[1-3]", "a,b c".
//
// It owns the grammar only:
//
//   - Names are separated by commas or white space; a name is made of
//     letters, digits, '.', '-' and '_' (corral's node names) and bracket
//     groups.
//   - A bracket group "[LIST]" is a comma-separated list of numbers "N" and
//     ranges "N-M" (N ≤ M). A number written with a leading zero fixes the
//     width of what it expands to: "n[08-10]" is n08, n09, n10, while
//     "n[8-10]" is n8, n9, n10.
//   - A name with several bracket groups stands for every combination, the
//     first group varying slowest: "a[1-2]b[1-2]" is a1b1, a1b2, a2b1,
//     a2b2.
//
// Slurm's "x" prisms of 3-D machines ("bgl[123x456]") are not read.
//
// Everything is bounded before anything is built: Count works out how
// many names a list stands for arithmetically, and Expand refuses a list of
// more than the limit its caller gives, so "n[0-999999999999]" costs a few
// bytes to refuse, never the memory of its names.
//
// Compress is the inverse: it sorts names, drops repeats and writes runs of
// numbered names as ranges, as `scontrol show hostlist` does. For every list
// of valid names, Expand(Compress(names)) is the sorted set of names.
//
// It never does I/O, and never decides whether a name is a node that
// exists (the controller does).
//
// The entry points are Expand, Count and Compress.
package hostlist
