package relay

// ledger is what a session knows of the items it handed out: the ones in flight (waiting
// for their fire time, queued in a lane, in a handler, or awaiting their ack), each with the
// hold of the partition it was taken under, and the ones whose ack completed while a scan
// was under way. It decides what of a scan's result may be handed out; see "What always
// holds" in the package doc for why it suffices.
//
// A scan that began before an ack completed may still return the acked item: the store's
// answer can be older than the ack. So every completed ack is recorded with the number of
// scans started at the moment it was recorded (no earlier than its completion), and scan n
// drops an item in flight, or acked at a count of n or more. Scans run one at a time, so
// once scan n is filtered no later scan needs an ack recorded at n or less: they are pruned.
//
// An item moved to dead is recorded as acked, and as buried: a revive may make it pending
// again at once, so a scan that drops it as acked may have read it pending anew. Such a scan
// must not hand out its execution's later items ahead of it (buried).
type ledger[K comparable] struct {
	scans    uint64 // scans started
	inFlight map[K]*hold
	acked    map[K]uint64 // item → scans started when its ack completion was recorded
	dead     map[K]bool   // the acked items that were moved to dead
}

func newLedger[K comparable]() ledger[K] {
	return ledger[K]{inFlight: map[K]*hold{}, acked: map[K]uint64{}, dead: map[K]bool{}}
}

// startScan counts a scan about to be sent and returns its number.
func (l *ledger[K]) startScan() uint64 {
	l.scans++
	return l.scans
}

// admissible reports whether scan n may hand out item k: it is not in flight, and its ack,
// if one completed, completed before scan n began.
func (l *ledger[K]) admissible(k K, n uint64) bool {
	if _, ok := l.inFlight[k]; ok {
		return false
	}
	a, ok := l.acked[k]
	return !ok || a < n
}

// holding reports whether k is in flight.
func (l *ledger[K]) holding(k K) bool {
	_, ok := l.inFlight[k]
	return ok
}

// take records k as handed out under h.
func (l *ledger[K]) take(k K, h *hold) {
	l.inFlight[k] = h
	h.inFlight++
}

// holdOf is the hold k was taken under, nil when k is not in flight.
func (l *ledger[K]) holdOf(k K) *hold { return l.inFlight[k] }

// release records k as no longer in flight and not acked: it is pending in the store, and
// the next scan may hand it out again. It returns the hold k was taken under.
func (l *ledger[K]) release(k K) *hold {
	h := l.inFlight[k]
	if h != nil {
		h.inFlight--
		delete(l.inFlight, k)
	}
	return h
}

// ack records that k's ack completed, and returns the hold k was taken under.
func (l *ledger[K]) ack(k K) *hold {
	h := l.release(k)
	l.acked[k] = l.scans
	delete(l.dead, k)
	return h
}

// bury records that k was moved to dead: acked, and buried (see the type). It returns the
// hold k was taken under.
func (l *ledger[K]) bury(k K) *hold {
	h := l.ack(k)
	l.dead[k] = true
	return h
}

// buried reports whether scan n drops k as moved to dead since it began: it may have read k
// revived, so k's execution's later items in it wait for a later scan.
func (l *ledger[K]) buried(k K, n uint64) bool {
	a, ok := l.acked[k]
	return ok && a >= n && l.dead[k]
}

// finishScan prunes what no scan after scan n needs: a scan numbered above n began after
// every ack recorded at n or less completed, so the store no longer returns those items.
func (l *ledger[K]) finishScan(n uint64) {
	for k, a := range l.acked {
		if a <= n {
			delete(l.acked, k)
			delete(l.dead, k)
		}
	}
}

// held is the number of items in flight.
func (l *ledger[K]) held() int { return len(l.inFlight) }
