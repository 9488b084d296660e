package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// maxViolations is how many violations a checker describes; it counts the
// rest.
const maxViolations = 20

// A checker verifies the run from what the program saw itself, not from the
// consumer: the records the producer wrote, every attempt the handler made,
// and every commit before it is sent (workleasekafka.WithCommitCheck).
//
// A record's value names its key and its number among the key's records,
// "key#seq", so the order of a key's records is known from their content
// as well as from their offsets.
type checker struct {
	maxRetries int // an attempt beyond this many retries that fails makes a dead letter

	mu         sync.Mutex // guards everything below
	keys       map[string]*keyLog
	parts      map[int32]*partLog
	commits    int
	finished   int           // records finished, by the handler's attempts
	changed    chan struct{} // closed and replaced when finished grows
	violations []string      // the first maxViolations
	// nOrder and nCommit count the violations of order (a key's records
	// handled other than once each, in order) and of commits.
	nOrder, nCommit int
}

// keyLog is what a checker knows of one key.
type keyLog struct {
	partition int32   // where the key's records were produced to
	placed    bool    // partition is set
	produced  []int64 // offsets of the key's records by seq; -1 until known
	running   bool    // an attempt on one of the key's records is under way
	attempts  []attempt
}

// An attempt is one call of the handler, in the order they ended (which is
// the order they ran: no two of a key's overlap, or running catches it).
type attempt struct {
	offset int64
	seq    int
	n      int // 1 for the first attempt at the record
	ok     bool
}

// partLog is what a checker knows of one partition.
type partLog struct {
	offsets  []int64        // produced offsets, in order
	finished map[int64]bool // the offsets of records terminal by the handler's attempts
	verified int            // every record of offsets[:verified] is finished
	// committed is the last commit sent; -1 before the first.
	committed int64
}

func newChecker(maxRetries int) *checker {
	return &checker{maxRetries: maxRetries, keys: map[string]*keyLog{}, parts: map[int32]*partLog{}, changed: make(chan struct{})}
}

// recordValue is the value of the seq-th record of key.
func recordValue(key string, seq int) []byte {
	return []byte(key + "#" + strconv.Itoa(seq))
}

// parseValue reads a value that recordValue wrote.
func parseValue(v []byte) (key string, seq int, ok bool) {
	k, s, found := strings.Cut(string(v), "#")
	if !found {
		return "", 0, false
	}
	n, err := strconv.Atoi(s)
	return k, n, err == nil && n >= 0
}

// violatef records a violation of order; c.mu is held.
func (c *checker) violatef(format string, args ...any) {
	c.nOrder++
	c.describe(format, args...)
}

// commitViolatef records a violation by a commit; c.mu is held.
func (c *checker) commitViolatef(format string, args ...any) {
	c.nCommit++
	c.describe(format, args...)
}

func (c *checker) describe(format string, args ...any) {
	if len(c.violations) < maxViolations {
		c.violations = append(c.violations, fmt.Sprintf(format, args...))
	}
}

func (c *checker) key(key string) *keyLog {
	k := c.keys[key]
	if k == nil {
		k = &keyLog{}
		c.keys[key] = k
	}
	return k
}

func (c *checker) part(p int32) *partLog {
	pl := c.parts[p]
	if pl == nil {
		pl = &partLog{finished: map[int64]bool{}, committed: -1}
		c.parts[p] = pl
	}
	return pl
}

// produced records that the producer wrote the seq-th record of key at
// offset of partition. A key's records go to one partition, and a
// partition's are acknowledged in offset order.
func (c *checker) produced(key string, seq int, partition int32, offset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.key(key)
	if k.placed && k.partition != partition {
		c.violatef("key %q: produced to partitions %d and %d", key, k.partition, partition)
	}
	k.partition, k.placed = partition, true
	for len(k.produced) <= seq {
		k.produced = append(k.produced, -1)
	}
	k.produced[seq] = offset
	pl := c.part(partition)
	if n := len(pl.offsets); n > 0 && offset <= pl.offsets[n-1] {
		c.violatef("partition %d: offset %d acknowledged after %d", partition, offset, pl.offsets[n-1])
		return
	}
	pl.offsets = append(pl.offsets, offset)
}

// begin records that an attempt at one of key's records started.
func (c *checker) begin(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.key(key)
	if k.running {
		c.violatef("key %q: two attempts at once", key)
	}
	k.running = true
}

// end records the outcome of the n-th attempt at the seq-th record of key,
// at offset of partition. The record is finished if the attempt succeeded
// or was the last one allowed.
func (c *checker) end(key string, partition int32, offset int64, seq, n int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.key(key)
	k.running = false
	k.attempts = append(k.attempts, attempt{offset: offset, seq: seq, n: n, ok: ok})
	if !ok && n <= c.maxRetries {
		return
	}
	pl := c.part(partition)
	if pl.finished[offset] {
		c.violatef("partition %d: offset %d finished twice", partition, offset)
		return
	}
	pl.finished[offset] = true
	c.finished++
	close(c.changed)
	c.changed = make(chan struct{})
}

// progress returns how many records are finished, and a channel closed
// when that number next grows.
func (c *checker) progress() (int, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.finished, c.changed
}

// heldUp says where each partition with unfinished records is held up:
// at its lowest record produced and not finished.
func (c *checker) heldUp() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := make([]int32, 0, len(c.parts))
	for p := range c.parts {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	var b strings.Builder
	for _, p := range ps {
		pl := c.parts[p]
		for _, o := range pl.offsets {
			if !pl.finished[o] {
				fmt.Fprintf(&b, "partition %d at offset %d; ", p, o)
				break
			}
		}
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// foreign records that the handler got a record that this run did not
// produce, or whose value does not name its key.
func (c *checker) foreign(key string, offset int64, value []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.violatef("key %q: offset %d: a record this run did not produce (%.40q)", key, offset, value)
}

// commit checks that partition may be committed at offset: every
// produced record below it is finished, and the commit does not go back.
// It records the commit and returns nil if so; otherwise it records a
// violation and returns it, and the commit must not be sent. The consumer
// calls it before each commit (workleasekafka.WithCommitCheck).
func (c *checker) commit(_ string, partition int32, offset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	pl := c.part(partition)
	for pl.verified < len(pl.offsets) && pl.finished[pl.offsets[pl.verified]] {
		pl.verified++
	}
	// The first produced record not known to be finished: no commit may
	// pass it. (The run's group starts where the topic ended before the
	// run, so every record the consumer gets is one produced here.)
	limit := int64(math.MaxInt64)
	if pl.verified < len(pl.offsets) {
		limit = pl.offsets[pl.verified]
	}
	var err error
	switch {
	case offset > limit:
		err = fmt.Errorf("partition %d: commit at %d passes unfinished record %d", partition, offset, limit)
	case offset < pl.committed:
		err = fmt.Errorf("partition %d: commit at %d goes back from %d", partition, offset, pl.committed)
	}
	if err != nil {
		c.commitViolatef("%v", err)
		return err
	}
	pl.committed = offset
	c.commits++
	return nil
}

// outcome is what the checker found at the end of a run.
type outcome struct {
	Keys, Records           int
	Processed, DeadLettered int // finished records, by the handler's attempts
	Retries                 int // failed attempts that were retried
	Commits                 int
	Violations              []string // the first maxViolations
	// OrderViolations and CommitViolations count the violations of order
	// and by commits.
	OrderViolations, CommitViolations int
}

// finish checks the run once everything is done, given each partition's
// offsets before and after the run's records and the offset committed for
// it: every key's records were handled once each, in the order they were
// produced (a record's attempts in a row, the last one a success or the last
// allowed, and nothing of the key's next record before), and every partition
// that got records was committed to its end.
func (c *checker) finish(starts, ends, committed map[int32]int64) outcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := outcome{Keys: len(c.keys), Commits: c.commits}
	keys := make([]string, 0, len(c.keys))
	for key := range c.keys {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys {
		k := c.keys[key]
		out.Records += len(k.produced)
		c.checkKey(key, k, &out)
	}
	for p, end := range ends {
		if end == starts[p] {
			continue // no records: nothing to poll or commit
		}
		if got, ok := committed[p]; !ok || got != end {
			c.commitViolatef("partition %d: committed at %d, not at its end %d", p, got, end)
		}
	}
	out.Violations = slices.Clone(c.violations)
	out.OrderViolations, out.CommitViolations = c.nOrder, c.nCommit
	return out
}

// checkKey checks the attempts of one key against its produced records.
func (c *checker) checkKey(key string, k *keyLog, out *outcome) {
	seq, n := 0, 1 // the attempt expected next
	for _, a := range k.attempts {
		if seq >= len(k.produced) || a.seq != seq || a.offset != k.produced[seq] || a.n != n {
			want := "none"
			if seq < len(k.produced) {
				want = fmt.Sprintf("attempt %d at #%d (offset %d)", n, seq, k.produced[seq])
			}
			c.violatef("key %q: attempt %d at #%d (offset %d) ran, expected %s", key, a.n, a.seq, a.offset, want)
			return
		}
		switch {
		case a.ok:
			out.Processed++
		case n > c.maxRetries:
			out.DeadLettered++
		default:
			out.Retries++
			n++
			continue
		}
		seq, n = seq+1, 1
	}
	if seq < len(k.produced) {
		c.violatef("key %q: %d of %d records finished", key, seq, len(k.produced))
	}
	if i := slices.Index(k.produced, -1); i >= 0 {
		c.violatef("key %q: record #%d never produced", key, i)
	}
}
