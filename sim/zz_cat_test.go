package sim

import (
	"fmt"
	"regexp"
	"sort"
	"testing"
)

func TestCategorize(t *testing.T) {
	_, fails := runSeeds(1, *schedulesFlag, nil)
	re := regexp.MustCompile(`[0-9]+(\.[0-9]+)?(ms|µs|s|m)?`)
	cats := map[string][]uint64{}
	for _, f := range fails {
		if f == nil {
			continue
		}
		d := f.Detail
		if len(d) > 90 {
			d = d[:90]
		}
		k := f.Property + " " + re.ReplaceAllString(d, "N")
		cats[k] = append(cats[k], f.Seed)
	}
	var ks []string
	for k := range cats {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return len(cats[ks[i]]) > len(cats[ks[j]]) })
	for _, k := range ks {
		fmt.Printf("%4d %s %v\n", len(cats[k]), k, cats[k][:min(4, len(cats[k]))])
	}
}
