package report

import (
	"math"
	"strconv"
	"strings"
)

// Human prints a number in human units, the one format of every count in
// the reports and plots: 452k, 1.2M, 3.4G; 3 significant digits, trailing
// zeros dropped; below a thousand, whole numbers stay whole (452) and
// fractions keep 3 significant digits (0.123, 4.5), down to 0.0005:
// below that, a difference is rounding noise and prints as 0.
func Human(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'f', -1, 64)
	case a < 0.0005:
		return "0"
	case a >= 999.5e6:
		return sig(v/1e9) + "G"
	case a >= 999.5e3:
		return sig(v/1e6) + "M"
	case a >= 999.5:
		return sig(v/1e3) + "k"
	case a >= 100:
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	return sig(v)
}

// sig prints v with 3 significant digits, no exponent, no trailing zeros.
func sig(v float64) string {
	if v == 0 {
		return "0"
	}
	digits := 2 - int(math.Floor(math.Log10(math.Abs(v))))
	if digits < 0 {
		digits = 0
	}
	s := strconv.FormatFloat(v, 'f', digits, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// signed is Human with a sign: +452k, -1.2M, 0.
func signed(v float64) string {
	if v > 0 {
		return "+" + Human(v)
	}
	return Human(v)
}
