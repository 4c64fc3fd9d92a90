package main

import (
	"bytes"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseFlagsDefaults(t *testing.T) {
	cfg, err := parseFlags(nil, "", io.Discard)
	require.NoError(t, err)
	require.Equal(t, "", cfg.uri, "no -uri and no $MONGODB_URI: the embedded server")
	require.Equal(t, []int{1, 8, 64}, cfg.concurrency)
	require.Equal(t, []string{"seed-port", "aio", "aio+batch", "aio+cache", "aio+otel", "raw", "memory"}, cfg.variants)
	require.Equal(t, quickExecutions, cfg.executions)
	require.Equal(t, quickEvents, cfg.events)
	require.Equal(t, []time.Duration{0}, cfg.rtts, "no proxy")
	require.Equal(t, 1, cfg.rounds)
	require.Equal(t, uint64(1), cfg.seed)
	require.Equal(t, 0.05, cfg.redeliver)
	require.Equal(t, "bench-out", cfg.out)
	require.False(t, cfg.scaling)
	require.Equal(t, []int{1000, 100000}, cfg.scalingSizes)
	require.Equal(t, 16, cfg.chains, "-chain 16x10")
	require.Equal(t, 10, cfg.chainHops)
}

func TestParseFlagsChain(t *testing.T) {
	for _, tc := range []struct {
		arg          string
		chains, hops int
	}{
		{"16x10", 16, 10},
		{" 4 x 3 ", 4, 3},
		{"1x1", 1, 1},
		{"1000x1000", 1000, 1000},
		{"none", 0, 0},
		{"", 0, 0},
	} {
		cfg, err := parseFlags([]string{"-chain", tc.arg}, "", io.Discard)
		require.NoError(t, err, tc.arg)
		require.Equal(t, tc.chains, cfg.chains, tc.arg)
		require.Equal(t, tc.hops, cfg.chainHops, tc.arg)
	}
	for _, arg := range []string{"16", "0x10", "16x0", "-1x2", "ax3", "16x10x2", "1001x1", "16X10"} {
		_, err := parseFlags([]string{"-chain", arg}, "", io.Discard)
		require.ErrorContains(t, err, "-chain", arg)
	}
}

func TestParseFlagsURI(t *testing.T) {
	cfg, err := parseFlags(nil, "mongodb://env:27017", io.Discard)
	require.NoError(t, err)
	require.Equal(t, "mongodb://env:27017", cfg.uri, "$MONGODB_URI is the default")

	cfg, err = parseFlags([]string{"-uri", "mongodb://flag:27017"}, "mongodb://env:27017", io.Discard)
	require.NoError(t, err)
	require.Equal(t, "mongodb://flag:27017", cfg.uri, "-uri wins over $MONGODB_URI")

	cfg, err = parseFlags([]string{"-uri", ""}, "mongodb://env:27017", io.Discard)
	require.NoError(t, err)
	require.Equal(t, "", cfg.uri, "an explicit empty -uri picks the embedded server")
}

func TestParseFlagsHelpShowsNoCredentials(t *testing.T) {
	var out bytes.Buffer
	_, err := parseFlags([]string{"-h"}, "mongodb://user:secret@host:27017", &out)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Contains(t, out.String(), "-concurrency")
	require.NotContains(t, out.String(), "secret")
}

func TestParseFlagsQuickSizes(t *testing.T) {
	cfg, err := parseFlags([]string{"-quick=false"}, "", io.Discard)
	require.NoError(t, err)
	require.Equal(t, fullExecutions, cfg.executions)
	require.Equal(t, fullEvents, cfg.events)

	cfg, err = parseFlags([]string{"-quick=false", "-executions", "7", "-events", "9"}, "", io.Discard)
	require.NoError(t, err)
	require.Equal(t, 7, cfg.executions, "an explicit size wins over -quick")
	require.Equal(t, 9, cfg.events)
}

func TestParseFlagsLists(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want []int
	}{
		{"1,8,64", []int{1, 8, 64}},
		{"64", []int{64}},
		{" 2, 4 ,8", []int{2, 4, 8}},
		{"8,1,8", []int{8, 1}}, // the order given, a repeated level measured once
	} {
		cfg, err := parseFlags([]string{"-concurrency", tc.arg}, "", io.Discard)
		require.NoError(t, err, tc.arg)
		require.Equal(t, tc.want, cfg.concurrency, tc.arg)
	}

	cfg, err := parseFlags([]string{"-scaling", "-scaling-sizes", "100,5000", "-scaling-due", "10"}, "", io.Discard)
	require.NoError(t, err)
	require.True(t, cfg.scaling)
	require.Equal(t, []int{100, 5000}, cfg.scalingSizes)
	require.Equal(t, 10, cfg.scalingDue)
}

func TestParseFlagsVariants(t *testing.T) {
	cfg, err := parseFlags([]string{"-variants", "raw, seed-port"}, "", io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{variantSeedPort, variantRaw}, cfg.variants, "in the order they run and are reported")

	cfg, err = parseFlags([]string{"-variants", "aio+batch,aio+batch"}, "", io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{variantBatch}, cfg.variants)

	cfg, err = parseFlags([]string{"-variants", "memory,aio"}, "", io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{variantAIO, variantMemory}, cfg.variants)

	cfg, err = parseFlags([]string{"-variants", "raw,aio+cache,aio"}, "", io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{variantAIO, variantCache, variantRaw}, cfg.variants)
}

func TestParseFlagsRTT(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		arg  string
		want []time.Duration
	}{
		{"0", []time.Duration{0}},
		{"2ms", []time.Duration{2 * ms}},
		{"1s", []time.Duration{time.Second}},
		{"0,2ms,10ms", []time.Duration{0, 2 * ms, 10 * ms}},
		{" 10ms , 0s", []time.Duration{10 * ms, 0}}, // the order given
		{"2ms,2000us,2ms", []time.Duration{2 * ms}}, // a repeated round trip measured once
	} {
		cfg, err := parseFlags([]string{"-rtt", tc.arg}, "", io.Discard)
		require.NoError(t, err, tc.arg)
		require.Equal(t, tc.want, cfg.rtts, tc.arg)
	}
	_, err := parseFlags([]string{"-rtt", "1500us"}, "", io.Discard)
	require.ErrorContains(t, err, "-rtt must be a non-negative whole number of milliseconds, got 1.5ms")
	_, err = parseFlags([]string{"-rtt", "0,2ms,1500us"}, "", io.Discard)
	require.ErrorContains(t, err, "-rtt must be a non-negative whole number of milliseconds, got 1.5ms", "every value is checked")
}

// Every bad value is refused with an error that names the flag and the value.
func TestParseFlagsRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-concurrency", "0"}, `-concurrency: "0" is not a positive integer`},
		{[]string{"-concurrency", "-8"}, `-concurrency: "-8" is not a positive integer`},
		{[]string{"-concurrency", "1,x,64"}, `-concurrency: "x" is not a positive integer`},
		{[]string{"-concurrency", "1,,64"}, `-concurrency: "" is not a positive integer`},
		{[]string{"-concurrency", ""}, `-concurrency: "" is not a positive integer`},
		{[]string{"-concurrency", "1;8"}, `-concurrency: "1;8" is not a positive integer`},
		{[]string{"-scaling-sizes", "1000,big"}, `-scaling-sizes: "big" is not a positive integer`},
		{[]string{"-scaling-sizes", "10"}, "-scaling-sizes: 10 is smaller than -scaling-due 20"},
		{[]string{"-variants", "aio,mongo"}, `-variants: unknown variant "mongo" (known: seed-port, aio, aio+batch, aio+cache, aio+otel, raw, memory)`},
		{[]string{"-variants", ""}, `-variants: unknown variant ""`},
		{[]string{"-rtt", "-2ms"}, "-rtt must be a non-negative whole number of milliseconds, got -2ms"},
		{[]string{"-rtt", "2"}, `invalid value "2" for flag -rtt`},
		{[]string{"-rtt", "fast"}, `invalid value "fast" for flag -rtt`},
		{[]string{"-rtt", "0,-2ms"}, "-rtt must be a non-negative whole number of milliseconds, got -2ms"},
		{[]string{"-rtt", "0,,2ms"}, `invalid value "0,,2ms" for flag -rtt`},
		{[]string{"-rtt", "2ms;10ms"}, `invalid value "2ms;10ms" for flag -rtt`},
		{[]string{"-rtt", ""}, `invalid value "" for flag -rtt`},
		{[]string{"-delivery-wait", "0s"}, "-delivery-wait must be positive, got 0s"},
		{[]string{"-delivery-wait", "-8ms"}, "-delivery-wait must be positive, got -8ms"},
		{[]string{"-delivery-wait", "40"}, `invalid value "40" for flag -delivery-wait`},
		{[]string{"-executions", "-1"}, "-executions must be at least 1, got -1"},
		{[]string{"-events", "-5"}, "-events must be at least 1, got -5"},
		{[]string{"-events", "many"}, `invalid value "many" for flag -events`},
		{[]string{"-redeliver", "1.5"}, "-redeliver must be between 0 and 1, got 1.5"},
		{[]string{"-redeliver", "-0.1"}, "-redeliver must be between 0 and 1, got -0.1"},
		{[]string{"-redeliver", "NaN"}, "-redeliver must be between 0 and 1, got NaN"},
		{[]string{"-rounds", "0"}, "-rounds must be at least 1, got 0"},
		{[]string{"-timeout", "0s"}, "-timeout and -run-timeout must be positive"},
		{[]string{"-run-timeout", "-1m"}, "-timeout and -run-timeout must be positive"},
		{[]string{"-scaling-due", "0"}, "-scaling-due must be at least 1, got 0"},
		{[]string{"-scaling-reps", "0"}, "-scaling-reps must be at least 1, got 0"},
		{[]string{"-index-growth", "-3"}, "-index-growth must not be negative, got -3"},
		{[]string{"-no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{[]string{"-rounds", "3", "extra"}, "unexpected arguments: extra"},
	} {
		name := strings.Join(tc.args, " ")
		_, err := parseFlags(tc.args, "", io.Discard)
		require.ErrorContains(t, err, tc.want, name)
	}
}

func TestParseFlagsDeliveryWait(t *testing.T) {
	cfg, err := parseFlags(nil, "", io.Discard)
	require.NoError(t, err)
	require.Equal(t, 8*time.Millisecond, cfg.deliveryWait)

	cfg, err = parseFlags([]string{"-delivery-wait", "40ms"}, "", io.Discard)
	require.NoError(t, err)
	require.Equal(t, 40*time.Millisecond, cfg.deliveryWait)
}

func TestParseFlagsIdem(t *testing.T) {
	cfg, err := parseFlags(nil, "", io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"idem", "idemkit"}, cfg.idemDesigns)
	require.Equal(t, []int{1, 64}, cfg.idemConcurrency)
	require.Equal(t, quickIdemKeys, cfg.idemKeys)

	cfg, err = parseFlags([]string{"-quick=false", "-idem", "idemkit, idem", "-idem-concurrency", "8"}, "", io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"idem", "idemkit"}, cfg.idemDesigns, "in the order they run")
	require.Equal(t, []int{8}, cfg.idemConcurrency)
	require.Equal(t, fullIdemKeys, cfg.idemKeys)

	for _, none := range []string{"none", ""} {
		cfg, err = parseFlags([]string{"-idem", none}, "", io.Discard)
		require.NoError(t, err)
		require.Empty(t, cfg.idemDesigns, "-idem %q", none)
	}

	_, err = parseFlags([]string{"-idem", "idem,redis"}, "", io.Discard)
	require.ErrorContains(t, err, `-idem: unknown design "redis"`)
	_, err = parseFlags([]string{"-idem-keys", "-1"}, "", io.Discard)
	require.ErrorContains(t, err, "-idem-keys must be at least 1")
	_, err = parseFlags([]string{"-idem-concurrency", "0"}, "", io.Discard)
	require.ErrorContains(t, err, "-idem-concurrency")
}

func TestParseFlagsJournal(t *testing.T) {
	cfg, err := parseFlags(nil, "", io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"journal"}, cfg.journalDesigns)
	require.Equal(t, []int{1, 64}, cfg.journalConcurrency)
	require.Equal(t, quickJournalInvocations, cfg.journalInvocations)

	cfg, err = parseFlags([]string{"-quick=false", "-journal", " journal", "-journal-concurrency", "8,8,2"}, "", io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"journal"}, cfg.journalDesigns)
	require.Equal(t, []int{8, 2}, cfg.journalConcurrency)
	require.Equal(t, fullJournalInvocations, cfg.journalInvocations)

	skipped := map[string]bool{}
	for _, none := range []string{"none", ""} {
		cfg, err = parseFlags([]string{"-journal", none}, "", io.Discard)
		require.NoError(t, err)
		skipped[none] = len(cfg.journalDesigns) == 0
	}
	require.Equal(t, map[string]bool{"none": true, "": true}, skipped)

	for args, want := range map[string]string{
		"-journal journal,wal":     `-journal: unknown design "wal"`,
		"-journal-invocations -1":  "-journal-invocations must be at least 1",
		"-journal-concurrency 1,0": "-journal-concurrency",
	} {
		_, err = parseFlags(strings.Fields(args), "", io.Discard)
		require.ErrorContains(t, err, want, args)
	}
}

// Quick runs above a round trip's first level are sized by the fastest server variant at the
// level below, within bounds; a given -events, or full runs, keep their size.
func TestLevelEvents(t *testing.T) {
	cfg, err := parseFlags(nil, "", io.Discard)
	require.NoError(t, err)
	require.True(t, cfg.sizeByServer)
	require.Equal(t, quickEvents, levelEvents(cfg, 0), "a round trip's first level")
	require.Equal(t, quickEvents, levelEvents(cfg, 60), "a slow server keeps the quick size")
	require.Equal(t, 675, levelEvents(cfg, 450))
	require.Equal(t, maxLevelEvents, levelEvents(cfg, 1e6))
	cfg, err = parseFlags([]string{"-events", "300"}, "", io.Discard)
	require.NoError(t, err)
	require.False(t, cfg.sizeByServer)
	require.Equal(t, 300, levelEvents(cfg, 450))
	cfg, err = parseFlags([]string{"-quick=false"}, "", io.Discard)
	require.NoError(t, err)
	require.Equal(t, fullEvents, levelEvents(cfg, 450))
}
