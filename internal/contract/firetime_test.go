package contract

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// exactStored is StoredTime the slow way: t's instant as an exact fraction, rounded once.
func exactStored(t time.Time) float64 {
	n := new(big.Int).Mul(big.NewInt(t.Unix()), big.NewInt(1e9))
	n.Add(n, big.NewInt(int64(t.Nanosecond())))
	f, _ := new(big.Rat).SetFrac(n, big.NewInt(1e9)).Float64()
	return f
}

// randomTime returns a time between from and to, to the nanosecond.
func randomTime(r *rand.Rand, from, to time.Time) time.Time {
	span := to.Unix() - from.Unix()
	return time.Unix(from.Unix()+r.Int64N(span), r.Int64N(1e9)).UTC()
}

// step is the distance from s to the next float64 away from zero.
func step(s float64) time.Duration {
	a := math.Abs(s)
	return time.Duration(math.Ceil((math.Nextafter(a, math.Inf(1)) - a) * 1e9))
}

func TestStoredTimeIsTheNearestFloat(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		tm := randomTime(r, MinFireTime, MaxFireTime)
		require.Equal(t, exactStored(tm), StoredTime(tm), "%s", tm.Format(time.RFC3339Nano))
	}
	for _, tm := range []time.Time{time.Unix(0, 0), time.Unix(0, 1), time.Unix(-1, 999_999_999), time.Unix(1, 500_000_000), MinFireTime, MaxFireTime} {
		assert.Equal(t, exactStored(tm), StoredTime(tm), "%s", tm.Format(time.RFC3339Nano))
	}
}

// Every value the store writes reads back as a time that writes the same value: a DueTimer's
// FireAt passed back to DeleteTimer matches the stored timer. It holds for the floats other
// writers of the same documents may have stored too (any float64 of a time after April 1970).
func TestFireTimeRoundTripIsDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 20_000 {
		s := StoredTime(randomTime(r, MinFireTime, MaxFireTime))
		back, ok := TimeFromStored(s)
		require.True(t, ok)
		require.Equal(t, s, StoredTime(back), "%v read back as %s", s, back.Format(time.RFC3339Nano))
	}
	for range 20_000 {
		s := 1e9 + r.Float64()*3e9 // 2001 to 2096, any float64
		back, ok := TimeFromStored(s)
		require.True(t, ok)
		require.Equal(t, s, StoredTime(back), "%v read back as %s", s, back.Format(time.RFC3339Nano))
	}
}

func TestFireTimeReadBackIsUTCWithoutMonotonicReading(t *testing.T) {
	now := time.Now()
	require.Contains(t, now.String(), "m=+", "time.Now carries a monotonic reading")
	assert.Equal(t, StoredTime(now.Round(0)), StoredTime(now))
	back, ok := TimeFromStored(StoredTime(now.In(time.FixedZone("X", 3600))))
	require.True(t, ok)
	assert.NotContains(t, back.String(), "m=")
	assert.Equal(t, time.UTC, back.Location())
}

func TestWholeMicrosecondsComeBackEqual(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	// ±2^33 s: beyond, the step passes a microsecond.
	from := time.Date(1697, time.October, 18, 0, 0, 0, 0, time.UTC)
	until := time.Date(2242, time.March, 16, 0, 0, 0, 0, time.UTC)
	for range 20_000 {
		tm := randomTime(r, from, until).Truncate(time.Microsecond)
		back, ok := TimeFromStored(StoredTime(tm))
		require.True(t, ok)
		require.True(t, tm.Equal(back), "%s read back as %s", tm.Format(time.RFC3339Nano), back.Format(time.RFC3339Nano))
	}
	ms := time.Date(2026, time.December, 1, 12, 0, 0, 123_000_000, time.UTC)
	back, _ := TimeFromStored(StoredTime(ms))
	assert.Equal(t, ms, back)
}

// The precision the API documents (execstore.TimerOp): a time read back lies less than one
// float64 step from the time scheduled. The worst error measured in each span must stay
// within the bound stated for it.
func TestFireTimePrecision(t *testing.T) {
	year := func(y int) time.Time { return time.Date(y, time.January, 1, 0, 0, 0, 0, time.UTC) }
	spans := []struct {
		from, to time.Time
		bound    time.Duration
	}{
		{year(2004).AddDate(0, 0, 10), year(2038), 239 * time.Nanosecond}, // step 2^-22 s
		{year(2038).AddDate(0, 0, 19), year(2106), 477 * time.Nanosecond}, // step 2^-21 s
		{year(2106).AddDate(0, 1, 7), year(2242), 954 * time.Nanosecond},  // step 2^-20 s
		{year(9999), MaxFireTime, 31 * time.Microsecond},                  // step 2^-15 s
		{MinFireTime, year(2), 8 * time.Microsecond},                      // step 2^-17 s
	}
	r := rand.New(rand.NewPCG(7, 8))
	for _, sp := range spans {
		var worst time.Duration
		for range 20_000 {
			tm := randomTime(r, sp.from, sp.to)
			s := StoredTime(tm)
			back, ok := TimeFromStored(s)
			require.True(t, ok)
			d := back.Sub(tm).Abs()
			require.Less(t, d, step(s), "%s read back as %s", tm.Format(time.RFC3339Nano), back.Format(time.RFC3339Nano))
			worst = max(worst, d)
		}
		assert.LessOrEqual(t, worst, sp.bound, "from %d to %d", sp.from.Year(), sp.to.Year())
		t.Logf("%d–%d: worst %v, step %v", sp.from.Year(), sp.to.Year(), worst, step(StoredTime(sp.to)))
	}
}

func TestValidateFireTime(t *testing.T) {
	for _, tm := range []time.Time{MinFireTime, MaxFireTime, time.Unix(0, 0), time.Now(), MinFireTime.In(time.FixedZone("W", -3600))} {
		assert.NoError(t, ValidateFireTime("f", tm), "%s", tm)
	}
	for _, tm := range []time.Time{{}, MinFireTime.Add(-time.Nanosecond), MaxFireTime.Add(time.Nanosecond), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		err := ValidateFireTime("Commit.Timers[0].FireAt", tm)
		var inv *execstore.InvalidError
		require.True(t, errors.As(err, &inv), "%s: %v", tm, err)
		assert.ErrorIs(t, err, execstore.ErrInvalid)
		assert.Equal(t, "Commit.Timers[0].FireAt", inv.Field)
	}
	assert.True(t, strings.Contains(ValidateFireTime("now", time.Time{}).Error(), "zero time"))
}

func TestTimeFromStoredRefusesWhatNoFireTimeStoresAs(t *testing.T) {
	for _, s := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e300, -1e300, StoredTime(MaxFireTime) + 1} {
		_, ok := TimeFromStored(s)
		assert.False(t, ok, "%v", s)
	}
	for _, tm := range []time.Time{MinFireTime, MaxFireTime} {
		back, ok := TimeFromStored(StoredTime(tm))
		require.True(t, ok)
		assert.Equal(t, tm, back)
	}
}

func BenchmarkStoredTime(b *testing.B) {
	tm := time.Now()
	for b.Loop() {
		tm = tm.Add(time.Nanosecond)
		_ = StoredTime(tm)
	}
}

func BenchmarkTimeFromStored(b *testing.B) {
	s := StoredTime(time.Now())
	for b.Loop() {
		s = math.Nextafter(s, math.Inf(1))
		_, _ = TimeFromStored(s)
	}
}
