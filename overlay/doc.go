// Package overlay is the contract between the protocol code and the runtimes that drive it.
//
// It owns the vocabulary every other package speaks: keys on a circle, half-open circular ranges,
// membership vectors, peer descriptors, the wire messages (overlay/pb), the ordered-store interface
// and the Env interface through which protocol code sends messages, sets timers, reads the clock and
// draws random numbers. It holds no protocol logic and imports no runtime: nothing here blocks,
// starts goroutines or touches the network.
package overlay
