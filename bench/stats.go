package bench

import (
	"fmt"
	"slices"
)

// Spread summarises repeated measures of one figure: the median, the quartiles and the extremes, so that a
// reader can see how far apart the repetitions were before trusting a difference.
type Spread struct {
	Median float64 `json:"median"`
	Q1     float64 `json:"q1"`
	Q3     float64 `json:"q3"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// Summarise returns the spread of xs (which it does not modify); the zero spread for none.
func Summarise(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return Spread{Median: quantile(s, 0.5), Q1: quantile(s, 0.25), Q3: quantile(s, 0.75), Min: s[0], Max: s[len(s)-1], N: len(s)}
}

// quantile interpolates linearly between the two nearest ranks of the sorted s.
func quantile(s []float64, q float64) float64 {
	if len(s) == 1 {
		return s[0]
	}
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}

// Format prints the median and the range, e.g. "×2.41 (2.30–2.55, n=7)".
func (s Spread) Format(unit string, prec int) string {
	if s.N == 0 {
		return "—"
	}
	p := func(v float64) string { return fmt.Sprintf("%.*f", prec, v) }
	if unit == "×" {
		return fmt.Sprintf("×%s (%s–%s, n=%d)", p(s.Median), p(s.Min), p(s.Max), s.N)
	}
	return fmt.Sprintf("%s%s (%s–%s, n=%d)", p(s.Median), unit, p(s.Min), p(s.Max), s.N)
}

// Pairs runs a then b, n times (A B A B …), and returns both series and the spread of the ratios a/b of each
// pair: machine-wide slowdowns hit both members of a pair alike, so the ratio is steadier than either figure.
func Pairs(n int, a, b func() (float64, error)) (as, bs []float64, ratio Spread, err error) {
	var rs []float64
	for range n {
		x, err := a()
		if err != nil {
			return nil, nil, Spread{}, err
		}
		y, err := b()
		if err != nil {
			return nil, nil, Spread{}, err
		}
		if y <= 0 {
			return nil, nil, Spread{}, fmt.Errorf("a measure of %v is not a duration", y)
		}
		as, bs, rs = append(as, x), append(bs, y), append(rs, x/y)
	}
	return as, bs, Summarise(rs), nil
}
