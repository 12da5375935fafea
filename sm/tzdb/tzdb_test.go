package tzdb

import (
	"errors"
	"testing"
	"time"
)

func TestLookup(t *testing.T) {
	for _, name := range []string{"Europe/Berlin", "America/New_York", "UTC", "Asia/Kolkata", "Australia/Lord_Howe"} {
		data, err := Lookup(name)
		if err != nil {
			t.Fatalf("Lookup(%q): %v", name, err)
		}
		loc, err := time.LoadLocationFromTZData(name, data)
		if err != nil {
			t.Fatalf("%s: rules do not load: %v", name, err)
		}
		if loc.String() != name {
			t.Errorf("%s: location named %q", name, loc)
		}
	}
	// Berlin's summer and winter offsets, from the compiled-in rules.
	data, _ := Lookup("Europe/Berlin")
	berlin, _ := time.LoadLocationFromTZData("Europe/Berlin", data)
	for _, c := range []struct {
		at   time.Time
		want int
	}{{time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC), 3600}, {time.Date(2026, 7, 15, 12, 0, 0, 0, time.UTC), 7200}} {
		if _, off := c.at.In(berlin).Zone(); off != c.want {
			t.Errorf("Berlin offset at %v = %d, want %d", c.at, off, c.want)
		}
	}
	for _, bad := range []string{"", "Local", "Mars/Olympus", "../../etc/passwd", "/etc/localtime", "europe/berlin"} {
		if _, err := Lookup(bad); !errors.Is(err, ErrUnknownZone) {
			t.Errorf("Lookup(%q) = %v, want ErrUnknownZone", bad, err)
		}
	}
}
