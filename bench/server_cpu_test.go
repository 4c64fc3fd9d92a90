package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A stat line's fields are counted after the command name, which may hold spaces and
// parentheses; the CPU is fields 14 to 17.
func TestParseProcStat(t *testing.T) {
	line := "4242 (postgres: a (b) c) S 15272 4242 4242 0 -1 4194560 1 0 0 0 7 3 2 1 20 0 1 0 99 0 0\n"
	st, err := parseProcStat(line)
	require.NoError(t, err)
	assert.Equal(t, procStat{ppid: 15272, ticks: 13}, st)

	_, err = parseProcStat("4242 postgres S 1")
	require.Error(t, err)
	_, err = parseProcStat("4242 (postgres) S 1 2 3")
	require.Error(t, err)
}

// The server's ticks are those of each process listed, once, and of every live child of one.
func TestSumServerTicks(t *testing.T) {
	all := map[int]procStat{
		1:  {ppid: 0, ticks: 1000}, // init: not the server's
		10: {ppid: 1, ticks: 5},    // the postmaster
		11: {ppid: 10, ticks: 7},   // a backend
		12: {ppid: 10, ticks: 3},
		20: {ppid: 1, ticks: 40}, // FerretDB
		30: {ppid: 11, ticks: 9}, // a grandchild: counted by its parent once it ends
	}
	got, err := sumServerTicks(serverProcesses{10, 20, 10}, all)
	require.NoError(t, err)
	assert.Equal(t, int64(5+7+3+40), got)
	_, err = sumServerTicks(serverProcesses{99}, all)
	require.ErrorContains(t, err, "server process 99: not running")
	assert.Equal(t, 250*time.Millisecond, ticksToDuration(25))
}

func TestParseServerPIDs(t *testing.T) {
	p, err := parseServerPIDs(" 15272,15280 ")
	require.NoError(t, err)
	assert.Equal(t, serverProcesses{15272, 15280}, p)
	p, err = parseServerPIDs("")
	require.NoError(t, err)
	assert.Empty(t, p)
	_, err = parseServerPIDs("15272,x")
	require.ErrorContains(t, err, `"x" is not a pid`)
}
