package sm

import "strings"

// MaxPathLen bounds a FileOp path (PATH_MAX).
const MaxPathLen = 4096

// CheckPath is the one rule every executor applies to a FileOp path (the
// real file adapter and the simulated disk alike): it returns why p is
// refused, or "". Refused: empty, longer than MaxPathLen, a NUL byte, an
// absolute path, an empty component (leading, trailing or doubled '/'),
// and "." or ".." components.
func CheckPath(p string) string {
	switch {
	case p == "":
		return "empty path"
	case len(p) > MaxPathLen:
		return "file name too long"
	case strings.IndexByte(p, 0) >= 0:
		return "NUL byte in path"
	case strings.HasPrefix(p, "/"):
		return "absolute path"
	}
	for comp := range strings.SplitSeq(p, "/") { // Split's components, without a slice of them
		switch comp {
		case "":
			return "empty component (trailing or doubled '/')"
		case ".", "..":
			return "'.' or '..' component"
		}
	}
	return ""
}
