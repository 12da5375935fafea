package sm

import "github.com/xce-hpc/xce/schema"

// decodeGeneration runs the one validating decode of a config blob and the
// reserved-name check every load path shares (seed 002 §6.5, §7.1), and
// returns the blob's generation.
func decodeGeneration(blob []byte) (uint64, error) {
	c, err := schema.DecodeClusterConfig(blob)
	if err != nil {
		return 0, err
	}
	if err := schema.Validate(c); err != nil { // the one validation every entry point runs
		return 0, err
	}
	return c.GetConfigGeneration(), nil
}
