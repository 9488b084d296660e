package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startCluster starts an in-process Kafka cluster of one broker and returns
// its address and a function that shuts it down.
func startCluster() (brokers []string, stop func(), err error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return nil, nil, fmt.Errorf("starting the in-process cluster: %w", err)
	}
	return c.ListenAddrs(), c.Close, nil
}

// prepareTopic creates the topic with the given number of partitions, or
// finds it if it exists, and returns each of its partitions' end offsets:
// where this run's records will start.
func prepareTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int) (map[int32]int64, error) {
	_, err := adm.CreateTopic(ctx, int32(partitions), -1, nil, topic) // -1: the cluster's replication factor
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return nil, fmt.Errorf("creating topic %q: %w", topic, err)
	}
	return endOffsets(ctx, adm, topic)
}

// endOffsets returns the end offset of each of topic's partitions: one past
// its last record.
func endOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	listed, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing the end offsets of %q: %w", topic, err)
	}
	ends := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	if len(ends) == 0 {
		return nil, fmt.Errorf("topic %q has no partitions", topic)
	}
	return ends, nil
}

// startGroupAt commits offsets for a new consumer group, so that its
// consumer starts there rather than at either end of the topic.
func startGroupAt(ctx context.Context, adm *kadm.Client, group, topic string, offsets map[int32]int64) error {
	os := kadm.Offsets{}
	for p, o := range offsets {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	resp, err := adm.CommitOffsets(ctx, group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("committing the start offsets of group %q: %w", group, err)
	}
	return nil
}

// committedOffsets returns the offsets group committed for topic, as the
// cluster has them.
func committedOffsets(ctx context.Context, adm *kadm.Client, group, topic string) (map[int32]int64, error) {
	resp, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("fetching the offsets of group %q: %w", group, err)
	}
	offs := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			offs[o.Partition] = o.At
		}
	})
	return offs, nil
}

// keyName is the name of the i-th key.
func keyName(i int) string { return "key-" + strconv.Itoa(i) }

// produce writes n records to the client's default topic, each under one
// of keys keys picked at random, the seq-th record of a key with the value
// recordValue(key, seq), and tells chk where each landed. Records of a key
// go to one partition (the default partitioner hashes the key) in the order
// they were produced, so each key's offsets grow with its seq. It returns
// once every record is acknowledged, or at the first error.
func produce(ctx context.Context, cl *kgo.Client, n, keys int, seed uint64, chk *checker, produced *atomic.Int64) error {
	rng := rand.New(rand.NewPCG(seed, 0))
	seqs := make([]int, keys)
	var (
		mu       sync.Mutex
		firstErr error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range n {
		if ctx.Err() != nil {
			break // a record failed, or the run is over
		}
		k := rng.IntN(keys)
		key, seq := keyName(k), seqs[k]
		seqs[k]++
		r := &kgo.Record{Key: []byte(key), Value: recordValue(key, seq)}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("producing: %w", err)
					cancel()
				}
				mu.Unlock()
				return
			}
			chk.produced(key, seq, r.Partition, r.Offset)
			produced.Add(1)
		})
	}
	err := cl.Flush(ctx)
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return firstErr
	}
	return err
}

// failer decides which attempts the handler fails: each attempt of each
// record fails with probability rate, drawn from the record, the attempt
// and a seed, so a seed replays the same failures whatever the schedule.
type failer struct {
	rate float64
	seed uint64
}

// fails reports whether the n-th attempt at the seq-th record of key fails.
func (f failer) fails(key string, seq, n int) bool {
	if f.rate <= 0 {
		return false
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	h.Write(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(seq)), uint64(n)))
	return rand.New(rand.NewPCG(f.seed, h.Sum64())).Float64() < f.rate
}
