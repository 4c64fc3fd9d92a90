package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The verdict is the report's one last line: PASS only when rows were checked, none failed,
// every run completed and the output files were written; otherwise FAIL with every reason.
func TestVerdictLine(t *testing.T) {
	passed := []checkedRows{{workload: "engine", rows: 3}}
	twoFailed := []checkedRows{{workload: "engine", rows: 3, failed: 1, failures: []string{"aio ×8: a: x", "aio ×8: b: y"}}}
	for name, tc := range map[string]struct {
		workloads []checkedRows
		stopped   error
		outputs   error
		want      string
	}{
		"every check passed": {passed, nil, nil, passLine},
		"two checks failed":  {twoFailed, nil, nil, "FAIL: 2 end-of-run checks failed (listed above)"},
		"a failed row without its checks named": {[]checkedRows{{workload: "engine", rows: 1, failed: 1}}, nil, nil,
			"FAIL: 1 end-of-run check failed (listed above)"},
		"stopped early": {passed, errors.New("aio at concurrency 8: boom"), nil,
			"FAIL: the benchmark stopped before its last run: aio at concurrency 8: boom"},
		"nothing checked":          {nil, nil, nil, "FAIL: no run completed, so nothing was checked"},
		"output files not written": {passed, nil, errors.New("disk full"), "FAIL: writing the output files: disk full"},
		"every reason at once": {twoFailed, errors.New("boom"), errors.New("disk full"),
			"FAIL: 2 end-of-run checks failed (listed above); the benchmark stopped before its last run: boom; " +
				"writing the output files: disk full"},
	} {
		var out bytes.Buffer
		status := writeVerdict(&out, tc.workloads, tc.stopped, tc.outputs)
		require.Equal(t, tc.want+"\n", out.String(), name)
		require.Equal(t, strings.HasPrefix(tc.want, "PASS"), status == 0, name)
		require.Contains(t, []int{0, 1}, status, name)
	}
}

// The checks section counts each workload's checked rows and lists every failed check after
// the counts; it says nothing when nothing was checked.
func TestChecksSection(t *testing.T) {
	var out bytes.Buffer
	writeChecks(&out, []checkedRows{
		{workload: "engine", rows: 4, failed: 1, failures: []string{"aio ×8: outbox empty at the end: 1 pending"}},
		{workload: "operation journal", rows: 2},
	})
	require.Equal(t, "\n"+checksHeading+"\n"+
		"  check   engine: 3 of 4 rows passed every check\n"+
		"  check   operation journal: 2 of 2 rows passed every check\n"+
		"  FAILED  aio ×8: outbox empty at the end: 1 pending\n", out.String())

	out.Reset()
	writeChecks(&out, nil)
	require.Empty(t, out.String())
}
