package relay

// sourcesLimit bounds the sources a hold remembers the last commit of. Past it the hold
// forgets them all: their next commits are found by a scan, which costs one server command,
// and they are remembered again.
const sourcesLimit = 1 << 14

// sources is what a hold knows of the items of each source execution of its partition (the
// execution whose document holds them). It is the one state machine that decides whether a
// commit through this process may be handed over without a scan:
//
//	unknown     nothing is known of the source: only its first commit (version 1) may be
//	            handed over, since nothing was written before it.
//	known(v)    no item the source wrote up to version v is pending in the store outside
//	            the relay's flight: each is in flight here, or acked, or was never written.
//	            Its commit v+1 may be handed over, and makes it known(v+1).
//	soiled(n)   some of its items were left in the store when n scans had been started: an
//	            item released (a failure, a hold that ended, a partition that stopped being
//	            handed out), held back for its execution's retry, or a commit not handed over
//	            (or whose outcome is unknown). Nothing of it is handed over.
//
// A won commit that is not handed over still records its version (known, under soiled): once
// soiled is cleared, no item up to it is pending outside the flight. Soiled is cleared by a
// complete scan numbered above n, sent while the hold was handing items out and admitted
// while it still was, that held none of the source's items back: the scan read every pending
// item of the source, and each is now in flight, or was in flight or acked already. Such a
// scan also makes the source known up to the latest commit whose items it read.
//
// A hold starts with every source unknown: what a hold knows was learned under it alone.
type sources struct {
	known  map[string]int64  // source → the version up to which nothing is pending outside the flight
	soiled map[string]uint64 // source → the scans started when some of its items were left in the store
}

func newSources() sources {
	return sources{known: map[string]int64{}, soiled: map[string]uint64{}}
}

// mayHandOver reports whether a commit of src creating version may be handed over. When the
// items are not kept in commit order (chained false: timers), any commit of a source that
// is not soiled may be.
func (s *sources) mayHandOver(src string, version int64, chained bool) bool {
	if _, ok := s.soiled[src]; ok {
		return false
	}
	if !chained || version == 1 {
		return true
	}
	last, ok := s.known[src]
	return ok && last == version-1
}

// committed records a won commit of src creating version, handed over or not.
func (s *sources) committed(src string, version int64) {
	if len(s.known) >= sourcesLimit {
		clear(s.known)
	}
	s.known[src] = max(s.known[src], version)
}

// forget makes src unknown: a commit of it whose outcome is unknown may have written
// anything.
func (s *sources) forget(src string) { delete(s.known, src) }

// soil records that some of src's items were left in the store when n scans had been
// started.
func (s *sources) soil(src string, n uint64) { s.soiled[src] = n }

// scanned applies scan n, complete and admitted while the hold handed items out: latest is
// the version of the latest commit whose items it read, per source; partial names the
// sources some of whose items it held back; only names the sources it read, when it read
// those alone (a targeted read; nil for a scan of the partition).
func (s *sources) scanned(n uint64, latest map[string]int64, partial, only map[string]bool) {
	for src, at := range s.soiled {
		if at < n && !partial[src] && (only == nil || only[src]) {
			delete(s.soiled, src)
		}
	}
	for src, v := range latest {
		if _, soiled := s.soiled[src]; v > 0 && !soiled && s.known[src] < v {
			s.committed(src, v)
		}
	}
}
