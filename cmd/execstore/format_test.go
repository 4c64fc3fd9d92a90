package main

import (
	"bytes"
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/internal/inspect"
)

// TestDurations checks how far from now a time is written (the largest unit and the next),
// and that JSON output escapes no HTML.
func TestDurations(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                      "now",
		400 * time.Millisecond: "now",
		45 * time.Second:       "in 45s",
		-45 * time.Second:      "45s ago",
		1000 * time.Second:     "in 16m40s",
		2 * time.Hour:          "in 2h",
		time.Hour + 16*time.Minute + 40*time.Second: "in 1h16m",
		-(76*time.Hour + 12*time.Minute):            "3d4h ago",
		24*time.Hour + 5*time.Minute:                "in 1d",
	} {
		require.Equal(t, want, inspect.FromNow(d), d)
	}

	var out bytes.Buffer
	require.NoError(t, emit(&out, output{JSON: true}, &inspect.ExecutionPage{Items: []inspect.ExecutionSummary{{ID: "<a&b>"}}}, writeList))
	require.Contains(t, out.String(), `"id": "<a&b>"`, "no HTML escaping")
}

// TestPlain checks that text output quotes what could break a line or the terminal.
func TestPlain(t *testing.T) {
	require.Equal(t, "order-1", plain("order-1"))
	require.Equal(t, "a b", plain("a b"))
	require.Equal(t, `""`, plain(""))
	require.Equal(t, `"a\tb"`, plain("a\tb"))
	require.Equal(t, `"x\x1b[31m"`, plain("x\x1b[31m"))
	require.Equal(t, `"\xff"`, plain("\xff"))
	require.Equal(t, "-", orDash(""))
}

// TestInterleavedFlags checks that flags are read before and after the arguments, and that
// "--" ends them.
func TestInterleavedFlags(t *testing.T) {
	parse := func(args ...string) (bool, int, []string) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		j := fs.Bool("json", false, "")
		n := fs.Int("trace", 10, "")
		pos, err := parseInterleaved(fs, args)
		require.NoError(t, err)
		return *j, *n, pos
	}
	j, n, pos := parse("order-1", "-json", "-trace", "3")
	require.Equal(t, []any{true, 3, []string{"order-1"}}, []any{j, n, pos})
	j, n, pos = parse("-trace", "2", "a", "b", "-json")
	require.Equal(t, []any{true, 2, []string{"a", "b"}}, []any{j, n, pos})
	j, _, pos = parse("--", "-json", "x")
	require.Equal(t, []any{false, []string{"-json", "x"}}, []any{j, pos})
	_, _, pos = parse("a", "--", "-trace")
	require.Equal(t, []string{"a", "-trace"}, pos)
}

// TestStatusFlag checks -status: comma lists, repeats, any case.
func TestStatusFlag(t *testing.T) {
	var s statusList
	require.NoError(t, s.Set("running, Done"))
	require.NoError(t, s.Set("FAILED"))
	require.Equal(t, "RUNNING,DONE,FAILED", s.String())
	require.ErrorContains(t, s.Set("runing"), `unknown status "runing"`)
}

// TestRedaction checks that an address is found in any URI and that credentials never
// survive in a message.
func TestRedaction(t *testing.T) {
	for uri, want := range map[string]string{
		"mongodb://h1:27017,h2:27018/db?replicaSet=rs": "h1:27017,h2:27018",
		"mongodb://user:p%40ss@host:1/?authSource=x":   "host:1",
		"mongodb://user:pa/ss@host:1/db":               "host:1",
		"mongodb+srv://u:p@cluster.example.net":        "cluster.example.net",
		"host-only":                                    "host-only",
		"mongodb://":                                   "(no host)",
	} {
		require.Equal(t, want, hostsOf(uri), uri)
	}
	uri := "mongodb://operator:p%40ss@host:1/?tlsCertificateKeyFilePassword=kf-secret"
	msg := redact("failed for "+uri+" as operator with p%40ss / p@ss and kf-secret", uri)
	for _, secret := range []string{"operator", "p%40ss", "p@ss", "kf-secret"} {
		require.NotContains(t, msg, secret)
	}
}
