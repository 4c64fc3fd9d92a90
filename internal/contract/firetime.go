package contract

import (
	"math"
	"math/big"
	"time"
)

// A fire time is a time.Time in the API and float64 seconds since the Unix epoch in the
// stored document model (the seed's, kept so that stored data needs no migration). The two
// meet only here: StoredTime writes a time, TimeFromStored reads one back.
//
// What always holds:
//   - StoredTime is the float64 nearest to t's instant, so it never goes backwards as t
//     goes forwards.
//   - StoredTime(TimeFromStored(s)) == s for every s that StoredTime returned. A FireAt read
//     back and passed to DeleteTimer therefore matches the stored timer exactly.
//   - A time of whole microseconds comes back equal while a float64 step is below a
//     microsecond (from 1698 to 2242). Any other time comes back less than one step away.

// MinFireTime and MaxFireTime are the earliest and the latest fire time accepted, within the
// years RFC 3339 can write. Both are whole seconds, stored exactly, so that every time between
// them reads back between them too (never as the zero time.Time, which is refused).
var (
	MinFireTime = time.Date(1, time.January, 1, 0, 0, 1, 0, time.UTC)
	MaxFireTime = time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC)
)

// ValidateFireTime checks a fire time or a due-timer scan's now: not the zero time.Time,
// within MinFireTime and MaxFireTime.
func ValidateFireTime(field string, t time.Time) error {
	switch {
	case t.IsZero():
		return Invalid(field, "must be set, got the zero time.Time")
	case t.Before(MinFireTime) || t.After(MaxFireTime):
		return Invalid(field, "must be from %s to %s, got %s", MinFireTime.Format(time.RFC3339),
			MaxFireTime.Format(time.RFC3339), t.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// StoredTime is t as the store keeps a fire time: the float64 nearest to t's seconds since
// the Unix epoch. t's monotonic clock reading and location play no part.
func StoredTime(t time.Time) float64 {
	sec, ns := t.Unix(), int64(t.Nanosecond())
	a, b := float64(sec), float64(ns)/1e9 // a is exact; b is off by at most 2^-54
	s := a + b
	// e is exactly (a+b) - s (Knuth's two-sum). The exact value is a+b+d with |d| <= 2^-54,
	// so s is the nearest float64 to it unless a+b lies within 2^-53 of a midpoint between s
	// and a neighbour.
	bv := s - a
	e := (a - (s - bv)) + (b - bv)
	gap := min(s-math.Nextafter(s, math.Inf(-1)), math.Nextafter(s, math.Inf(1))-s)
	if math.Abs(e)+0x1p-53 < gap/2 {
		return s
	}
	exact := new(big.Int).Mul(big.NewInt(sec), big.NewInt(1e9))
	exact.Add(exact, big.NewInt(ns))
	f, _ := new(big.Rat).SetFrac(exact, big.NewInt(1e9)).Float64()
	return f
}

// TimeFromStored is the fire time a stored value stands for, in UTC with no monotonic clock
// reading: the nearest whole microsecond when StoredTime gives s back for it, else the nearest
// nanosecond. ok is false for a value no fire time within MinFireTime and MaxFireTime stores
// as (NaN, an infinity, too far off): such a value was not written by this module.
func TimeFromStored(s float64) (t time.Time, ok bool) {
	if !(s >= minStored && s <= maxStored) {
		return time.Time{}, false
	}
	sec := math.Floor(s)
	frac := s - sec // exact for |s| >= 1; below, the candidates are checked all the same
	micro := time.Unix(int64(sec), int64(math.Round(frac*1e6))*1000).UTC()
	if StoredTime(micro) == s {
		return micro, true
	}
	nano := time.Unix(int64(sec), int64(math.Round(frac*1e9))).UTC()
	for _, d := range []time.Duration{0, 1, -1} {
		if c := nano.Add(d); StoredTime(c) == s {
			return c, true
		}
	}
	return nano, true
}

// minStored and maxStored are the stored values of MinFireTime and MaxFireTime.
var (
	minStored = StoredTime(MinFireTime)
	maxStored = StoredTime(MaxFireTime)
)
