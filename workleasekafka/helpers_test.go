package workleasekafka_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/worklease/worklease"
	"github.com/worklease/worklease/workleasekafka"
)

var errInvalidConfig = worklease.ErrInvalidConfig

// waitFor bounds every wait of the tests: only a failure takes it.
const waitFor = 2 * time.Minute

// fastBackoff keeps retries quick.
var fastBackoff = workleasekafka.WithBackoff(worklease.Backoff{Base: time.Millisecond, Max: 5 * time.Millisecond})

// newCluster starts an in-process cluster with topics of partitions
// partitions each, closed when t ends, and returns its address.
func newCluster(t testing.TB, partitions int32, topics ...string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// A produced record: where the n-th record of a key landed.
type produced struct {
	key       string
	seq       int
	partition int32
	offset    int64
}

// produce writes n records to topic, the i-th under key "k<i%keys>" with
// the value "k<i%keys>#<its number among the key's records>", and returns
// them in the order written.
func produce(t testing.TB, brokers []string, topic string, n, keys int) []produced {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	defer cl.Close()
	seqs := make([]int, keys)
	recs := make([]*kgo.Record, n)
	out := make([]produced, n)
	for i := range n {
		k := i % keys
		key := "k" + strconv.Itoa(k)
		out[i] = produced{key: key, seq: seqs[k]}
		recs[i] = &kgo.Record{Key: []byte(key), Value: []byte(key + "#" + strconv.Itoa(seqs[k]))}
		seqs[k]++
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	for i, r := range recs {
		out[i].partition, out[i].offset = r.Partition, r.Offset
	}
	return out
}

// committed returns the offsets group committed for topic.
func committed(t testing.TB, brokers []string, group, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	resp, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			out[o.Partition] = o.At
		}
	})
	return out
}

// ends returns one past the last offset of each partition of topic.
func ends(recs []produced) map[int32]int64 {
	out := map[int32]int64{}
	for _, r := range recs {
		out[r.partition] = max(out[r.partition], r.offset+1)
	}
	return out
}

// clientOpts are a group consumer's options, from the earliest offset.
func clientOpts(brokers []string, group string, topics ...string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Short, so that joins and leaves settle fast; still well above
		// what a loaded machine takes to heartbeat.
		kgo.HeartbeatInterval(100 * time.Millisecond),
	}
}

// A run is one attempt the handler made at a record.
type run struct {
	member    int // which consumer
	partition int32
	offset    int64
	attempt   int
	ok        bool
}

// A journal records what handlers did, for the checks.
type journal struct {
	mu      sync.Mutex
	runs    map[string][]run // by key, in the order they ended
	running map[string]int   // attempts under way, by key
	overlap []string         // keys that ran two attempts at once
	done    map[[2]int64]int // successful runs by partition and offset
	changed chan struct{}    // closed and replaced at each success
}

func newJournal() *journal {
	return &journal{runs: map[string][]run{}, running: map[string]int{}, done: map[[2]int64]int{}, changed: make(chan struct{})}
}

// begin and end bracket an attempt at r by member.
func (j *journal) begin(r *kgo.Record) {
	j.mu.Lock()
	defer j.mu.Unlock()
	k := string(r.Key)
	j.running[k]++
	if j.running[k] > 1 {
		j.overlap = append(j.overlap, k)
	}
}

func (j *journal) end(member int, r *kgo.Record, attempt int, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	k := string(r.Key)
	j.running[k]--
	j.runs[k] = append(j.runs[k], run{member: member, partition: r.Partition, offset: r.Offset, attempt: attempt, ok: ok})
	if ok {
		j.done[[2]int64{int64(r.Partition), r.Offset}]++
		close(j.changed)
		j.changed = make(chan struct{})
	}
}

// finished reports whether the record at partition and offset has run to
// success.
func (j *journal) finished(partition int32, offset int64) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.done[[2]int64{int64(partition), offset}] > 0
}

// waitDone waits until every record of recs has run to success.
func (j *journal) waitDone(t testing.TB, recs []produced) {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		j.mu.Lock()
		missing := 0
		for _, r := range recs {
			if j.done[[2]int64{int64(r.partition), r.offset}] == 0 {
				missing++
			}
		}
		ch := j.changed
		j.mu.Unlock()
		if missing == 0 {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%d of %d records never finished", missing, len(recs))
		}
	}
}

// checkOrder checks that each key's successful runs came in the order its
// records were produced, each at least once, and that no two attempts of a
// key overlapped. With again, a success may also be of a record at or
// below the key's last success (a member died before committing it, and
// the key's records go again from there); the caller checks those.
// Without, every record ran to success once.
func (j *journal) checkOrder(t testing.TB, recs []produced, again bool) {
	t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	require.Empty(t, j.overlap, "keys that ran two attempts at once")
	byKey := map[string][]int64{}
	for _, r := range recs {
		byKey[r.key] = append(byKey[r.key], r.offset)
	}
	for key, offsets := range byKey {
		var got []int64
		for _, r := range j.runs[key] {
			if r.ok {
				got = append(got, r.offset)
			}
		}
		// Each success is the key's next record, or a record at or below
		// the last success (run again from a commit), from where the
		// key's records go on in order.
		next := 0 // index in offsets of the record expected next
		for _, o := range got {
			i := slices.Index(offsets, o)
			require.GreaterOrEqual(t, i, 0, "key %s: offset %d is not the key's", key, o)
			if again {
				require.LessOrEqual(t, i, next, "key %s: offset %d ran before offset %d (%v)", key, o, offsets[min(next, len(offsets)-1)], got)
			} else {
				require.Equal(t, next, i, "key %s: offset %d ran, expected offset %d (%v)", key, o, offsets[min(next, len(offsets)-1)], got)
			}
			next = i + 1
		}
		require.Equal(t, len(offsets), next, "key %s: the last record did not run last: %v", key, got)
	}
}
