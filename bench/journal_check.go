package main

import (
	"bytes"
	"fmt"

	"github.com/execstore/execstore/journal"
)

// journalChecks checks a run of the journal workload: what it saw, t, against the
// invocations the journal's Read found at the end, by id, and the number of records stored.
func journalChecks(t *journalTally, stored map[string]journalRecord, records int) []check {
	return []check{
		checkJournalNoError(t, stored),
		checkJournalClaimedOnce(t, stored),
		checkJournalSucceeded(t, stored, records),
	}
}

// checkJournalNoError: no call of any invocation failed, and every invocation was read back.
func checkJournalNoError(t *journalTally, stored map[string]journalRecord) check {
	c := check{name: "no error"}
	var bad []string
	for i, id := range t.ids {
		if err := t.errs[i]; err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", id, err))
		}
		if rec, found := stored[id]; found && rec.err != nil {
			bad = append(bad, fmt.Sprintf("%s: read: %v", id, rec.err))
		}
	}
	c.ok = len(bad) == 0
	c.detail = fmt.Sprintf("%d invocations", len(t.ids))
	if !c.ok {
		c.detail = fmt.Sprintf("%d errors: %s", len(bad), listed(bad))
	}
	return c
}

// checkJournalClaimedOnce: every invocation was claimed exactly once, by the caller that ran
// it, as its first owner (revision 1), and is stored with that owner.
func checkJournalClaimedOnce(t *journalTally, stored map[string]journalRecord) check {
	c := check{name: "every invocation claimed exactly once by its owner"}
	var bad []string
	for i, id := range t.ids {
		rec, found := stored[id]
		switch {
		case t.owners[i] == "" || t.claims[i] != 1:
			bad = append(bad, fmt.Sprintf("%s claimed %d times", id, t.claims[i]))
		case t.claimRev[i] != 1:
			bad = append(bad, fmt.Sprintf("%s: claim returned revision %d", id, t.claimRev[i]))
		case !found || rec.err != nil:
			bad = append(bad, fmt.Sprintf("%s: not read back", id))
		case rec.owner != t.owners[i]:
			bad = append(bad, fmt.Sprintf("%s: stored owner %q, claimed by %q", id, rec.owner, t.owners[i]))
		}
	}
	c.ok = len(bad) == 0
	c.detail = fmt.Sprintf("%d invocations", len(t.ids))
	if !c.ok {
		c.detail = listed(bad)
	}
	return c
}

// checkJournalSucceeded: every invocation ended reconciled Succeeded at journalRevision, as
// the reconcile's fence and the stored record both say: one attempt, with the receipt of it,
// prepared from the checkpoint the caller wrote, each payload its own; no other record.
func checkJournalSucceeded(t *journalTally, stored map[string]journalRecord, records int) check {
	c := check{name: fmt.Sprintf("every invocation reconciled succeeded at revision %d", journalRevision)}
	var bad []string
	done := 0
	for i, id := range t.ids {
		rec := stored[id]
		switch {
		case t.final[i] != journalRevision:
			bad = append(bad, fmt.Sprintf("%s: reconcile returned revision %d", id, t.final[i]))
		case rec.err != nil || rec.revision != journalRevision:
			bad = append(bad, fmt.Sprintf("%s: stored at revision %d", id, rec.revision))
		case rec.latest != string(journal.Succeeded) || rec.attempts != 1 || rec.noReplay:
			bad = append(bad, fmt.Sprintf("%s: stored latest %q after %d attempts (no replay %t)", id, rec.latest, rec.attempts, rec.noReplay))
		case len(rec.receipts) != 1 || rec.receipts[0].Attempt != 1 || rec.receipts[0].Outcome != journal.Succeeded ||
			!bytes.Equal(rec.receipts[0].Data, journalReceipt(id)):
			bad = append(bad, fmt.Sprintf("%s: stored receipts %s", id, receiptsString(rec.receipts)))
		case rec.checkpointID != t.checkpoint[i] || rec.preparedFrom != t.checkpoint[i] ||
			!bytes.Equal(rec.state, journalState(id)):
			bad = append(bad, fmt.Sprintf("%s: stored checkpoint %q (prepared from %q), written %q", id,
				rec.checkpointID, rec.preparedFrom, t.checkpoint[i]))
		default:
			done++
		}
	}
	if len(bad) == 0 && records != len(t.ids) {
		bad = append(bad, fmt.Sprintf("%d records stored for %d invocations", records, len(t.ids)))
	}
	c.ok = len(bad) == 0
	c.detail = fmt.Sprintf("%d of %d", done, len(t.ids))
	if !c.ok {
		c.detail = listed(bad)
	}
	return c
}

// receiptsString shows receipts by attempt, outcome and data.
func receiptsString(rs []journal.Receipt) string {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, r := range rs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %s %q", r.Attempt, r.Outcome, r.Data)
	}
	b.WriteByte(']')
	return b.String()
}
