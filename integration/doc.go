// Package integration holds the real-process integration tests: the
// xcecontroller binary, built once by TestMain, run as separate processes
// on loopback with real TLS, real files and real timers, driven by the
// clitool.Cluster harness (seed 002 §14.2, issue 4 item 7).
//
// The package has no non-test code. `go test ./integration` runs the
// tests; `go test ./integration -run '^$' -bench . -benchtime 5x` runs the
// wall-clock measurements recorded in docs/performance.md.
package integration
