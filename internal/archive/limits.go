package archive

import "github.com/kiln-dev/kiln/internal/kiln"

// PackLimits bound what Pack reads. Zero fields take the defaults.
type PackLimits struct {
	MaxDepth   int   // directory levels below the packed directory; default 64
	MaxEntries int   // files and directories; default 10,000
	MaxBytes   int64 // total bytes of the files; default 512 MiB
}

// UnpackLimits bound what Unpack accepts. Zero fields take the defaults.
type UnpackLimits struct {
	MaxArchiveBytes int64 // the archive as uploaded; default 256 MiB
	MaxEntries      int   // entries of any type; default 10,000
	MaxBytes        int64 // total bytes written, declared and actual; default 512 MiB
	// MaxRatio bounds how many times its compressed size an entry over
	// RatioMinBytes may expand to (for tar.gz: the whole stream); default
	// 200. Ordinary data compresses 2-20 times; zeros 1000 times.
	MaxRatio      int64
	RatioMinBytes int64 // default 1 MiB
}

func (l PackLimits) withDefaults() PackLimits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = 64
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = 10000
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = 512 * kiln.MiB
	}
	return l
}

func (l UnpackLimits) withDefaults() UnpackLimits {
	if l.MaxArchiveBytes <= 0 {
		l.MaxArchiveBytes = 256 * kiln.MiB
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = 10000
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = 512 * kiln.MiB
	}
	if l.MaxRatio <= 0 {
		l.MaxRatio = 200
	}
	if l.RatioMinBytes <= 0 {
		l.RatioMinBytes = kiln.MiB
	}
	return l
}

// satMul multiplies without overflowing: a bound that would overflow is
// no bound.
func satMul(a, b int64) int64 {
	if a != 0 && b > (1<<63-1)/a {
		return 1<<63 - 1
	}
	return a * b
}
