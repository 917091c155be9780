// Package report renders the results of simulator experiments for a person
// to read: Markdown tables (for stdout), CSV files (for further analysis)
// and plots (SVG, or PNG when the file name says so) drawn with
// gonum.org/v1/plot.
//
// It owns presentation only — formatting numbers, laying out tables and
// figures, writing files. It holds no simulation logic and computes no
// metrics beyond the mean and standard deviation shown by MeanSpread.
//
// Everything is deterministic: the same input gives byte-identical output.
// Bad input (mismatched lengths, empty data, NaN or infinite values) is
// reported as an error, never as a panic.
package report
