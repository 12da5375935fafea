// Package fuzz holds xce's native Go fuzz targets for everything decoded
// from disk or the network: the conf/current pointer file
// (FuzzParsePointer), the ClusterConfig blob (FuzzDecodeClusterConfig),
// controller wire frames (FuzzWireDecode, FuzzReadFrame), the doors
// (FuzzClientRequest, FuzzHello, FuzzYAML), the authorisation decision
// (FuzzAuthorize), WAL records, segments and snapshots (FuzzWALRecord,
// FuzzWALSegment, FuzzSnapshot) and the WAL's hand decoder of records
// against proto.Unmarshal (FuzzWALWalk). Seed corpora live in
// testdata/fuzz/<FuzzName>/ and run as ordinary tests under `go test`;
// `make fuzz` runs each target for FUZZTIME.
package fuzz
