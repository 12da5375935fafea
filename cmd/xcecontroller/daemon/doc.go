// Package daemon assembles one xcecontroller node from the adapters: TLS
// transport, real files, timers, logging, systemd notification. Its
// --peers flag is parsed by package peerlist, as every xce program's.
package daemon
