package workleasekafka_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/worklease/worklease/workleasekafka"
)

// The Consumer against what a Go user writes today: franz-go's
// goroutine-per-partition consumer (its examples/goroutine_per_partition_
// consuming/autocommit_marks, below as perPartition), which runs each
// partition's records one after the other in a goroutine of its own.
//
// Each sub-benchmark consumes b.N records that were produced before it
// started, over 1,000 keys to a topic of 4 partitions of an in-process
// cluster, through a real kgo client in a consumer group of its own, and
// stops once its handler has seen every record. Both consumers of a
// handler read the same topic. The time, reported as ns/op and
// records/s, runs from the first record handled to the last, so that
// joining the group is left out for both; cpu-ns/op is the CPU time the
// process spent per record over the same span, where the platform tells
// it, the in-process cluster's included for both, which on a busy machine
// compares the two more steadily than their times.
//
//	go test -run='^$' -bench='BenchmarkKafka/handler=1ms' -benchtime=20000x
//	go test -run='^$' -bench='BenchmarkKafka/handler=none' -benchtime=200000x
//
// A run of fewer than minMeasured records (a -benchtime=1x smoke run, say)
// reports neither figure: it shows the benchmark works, and measures
// nothing.
func BenchmarkKafka(b *testing.B) {
	const partitions, keys, handlers = 4, 1000, 64
	for _, work := range []struct {
		name string
		d    time.Duration
	}{{"1ms", time.Millisecond}, {"none", 0}} {
		b.Run("handler="+work.name, func(b *testing.B) {
			cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(partitions), kfake.AllowAutoTopicCreation())
			if err != nil {
				b.Fatal(err)
			}
			defer cluster.Close()
			brokers := cluster.ListenAddrs()
			topics := map[int]string{} // by record count: both consumers read the same topic
			topicOf := func(b *testing.B) string {
				if t, ok := topics[b.N]; ok {
					return t
				}
				t := "bench-" + strconv.Itoa(b.N)
				produceBench(b, brokers, t, b.N, keys)
				topics[b.N] = t
				return t
			}
			handle := func() {
				if work.d > 0 {
					time.Sleep(work.d)
				}
			}
			b.Run("impl=parallel", func(b *testing.B) {
				topic := topicOf(b)
				var m meter
				m.init(b.N)
				c, err := workleasekafka.New(benchOpts(brokers, topic), func(ctx context.Context, r *kgo.Record) error {
					handle()
					m.handled()
					return nil
				}, workleasekafka.WithHandlers(handlers))
				if err != nil {
					b.Fatal(err)
				}
				ran := make(chan error, 1)
				b.ResetTimer()
				go func() { ran <- c.Run(context.Background()) }()
				m.wait(b)
				b.StopTimer()
				if err := c.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
				if err := <-ran; err != nil {
					b.Fatal(err)
				}
			})
			b.Run("impl=per-partition", func(b *testing.B) {
				topic := topicOf(b)
				var m meter
				m.init(b.N)
				s := &perPartition{consumers: map[tp]*pconsumer{}, handle: func(*kgo.Record) {
					handle()
					m.handled()
				}}
				cl, err := kgo.NewClient(append(benchOpts(brokers, topic),
					kgo.OnPartitionsAssigned(s.assigned),
					kgo.OnPartitionsRevoked(s.revoked),
					kgo.OnPartitionsLost(s.lost),
					kgo.AutoCommitMarks(),
					kgo.BlockRebalanceOnPoll(),
				)...)
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				polled := make(chan struct{})
				b.ResetTimer()
				go func() {
					defer close(polled)
					s.poll(ctx, cl)
				}()
				m.wait(b)
				b.StopTimer()
				cancel()
				<-polled
				cl.Close()
			})
		})
	}
}

// minMeasured is the fewest records a run must consume for its figures to
// be reported.
const minMeasured = 1000

// A meter times a run: from the first record handled to the n-th.
type meter struct {
	n     int64
	count atomic.Int64
	first atomic.Int64 // unix nanoseconds of the first record handled
	// The process's CPU time when the first record was handled, and when
	// the last was, in nanoseconds; 0 if the platform does not tell it.
	cpuFirst atomic.Int64
	cpuEnd   int64
	done     chan struct{}
	end      time.Time
}

func (m *meter) init(n int) {
	m.n, m.done = int64(n), make(chan struct{})
}

func (m *meter) handled() {
	if m.first.Load() == 0 && m.first.CompareAndSwap(0, time.Now().UnixNano()) {
		cpu, _ := processCPU()
		m.cpuFirst.Store(cpu.Nanoseconds())
	}
	if m.count.Add(1) == m.n {
		m.end = time.Now()
		cpu, _ := processCPU()
		m.cpuEnd = cpu.Nanoseconds()
		close(m.done)
	}
}

// wait waits for the last record and reports the run's figures: ns/op is
// the time per record from the first handled to the last.
func (m *meter) wait(b *testing.B) {
	select {
	case <-m.done:
	case <-time.After(10 * time.Minute):
		b.Fatalf("%d of %d records handled", m.count.Load(), m.n)
	}
	if m.n < minMeasured {
		b.ReportMetric(0, "ns/op") // suppressed: too few records to measure
		return
	}
	d := m.end.Sub(time.Unix(0, m.first.Load()))
	if first := m.cpuFirst.Load(); first > 0 && m.cpuEnd > 0 {
		b.ReportMetric(float64(m.cpuEnd-first)/float64(m.n), "cpu-ns/op")
	}
	b.ReportMetric(float64(d.Nanoseconds())/float64(m.n), "ns/op")
	b.ReportMetric(float64(m.n)/d.Seconds(), "records/s")
}

var benchGroups atomic.Int64

// benchOpts are a consumer's client options: a group of its own, from the
// start of topic.
func benchOpts(brokers []string, topic string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ConsumerGroup(fmt.Sprint("bench-", benchGroups.Add(1))),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
}

// produceBench writes n records over keys keys to a new topic, which the
// cluster creates with its default number of partitions.
func produceBench(b *testing.B, brokers []string, topic string, n, keys int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	var failed atomic.Value
	for i := range n {
		wg.Add(1)
		k := strconv.Itoa(i % keys)
		cl.Produce(ctx, &kgo.Record{Key: []byte("key-" + k), Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}

// What follows is franz-go's examples/goroutine_per_partition_consuming/
// autocommit_marks/main.go, with its simulated work replaced by a handler
// called on each record in turn, and a context to end the poll loop.

type tp struct {
	t string
	p int32
}

type pconsumer struct {
	cl        *kgo.Client
	topic     string
	partition int32
	handle    func(*kgo.Record)

	quit chan struct{}
	done chan struct{}
	recs chan kgo.FetchTopicPartition
}

type perPartition struct {
	// Using BlockRebalanceOnPoll means we do not need a mu to manage
	// consumers.
	consumers map[tp]*pconsumer
	handle    func(*kgo.Record)
}

func (pc *pconsumer) consume() {
	defer close(pc.done)
	for {
		select {
		case <-pc.quit:
			return
		case p := <-pc.recs:
			for _, r := range p.Records {
				pc.handle(r)
			}
			pc.cl.MarkCommitRecords(p.Records...)
		}
	}
}

func (s *perPartition) assigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	for topic, partitions := range assigned {
		for _, partition := range partitions {
			pc := &pconsumer{
				cl:        cl,
				topic:     topic,
				partition: partition,
				handle:    s.handle,

				quit: make(chan struct{}),
				done: make(chan struct{}),
				recs: make(chan kgo.FetchTopicPartition, 5),
			}
			s.consumers[tp{topic, partition}] = pc
			go pc.consume()
		}
	}
}

func (s *perPartition) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	s.killConsumers(revoked)
	if err := cl.CommitMarkedOffsets(ctx); err != nil {
		fmt.Printf("Revoke commit failed: %v\n", err)
	}
}

func (s *perPartition) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	s.killConsumers(lost)
	// Losing means we cannot commit: an error happened.
}

func (s *perPartition) killConsumers(lost map[string][]int32) {
	var wg sync.WaitGroup
	defer wg.Wait()

	for topic, partitions := range lost {
		for _, partition := range partitions {
			tp := tp{topic, partition}
			pc := s.consumers[tp]
			delete(s.consumers, tp)
			close(pc.quit)
			wg.Add(1)
			go func() { <-pc.done; wg.Done() }()
		}
	}
}

func (s *perPartition) poll(ctx context.Context, cl *kgo.Client) {
	for {
		// PollRecords is strongly recommended when using
		// BlockRebalanceOnPoll. You can tune how many records to
		// process at once (upper bound -- could all be on one
		// partition), ensuring that your processor loops complete fast
		// enough to not block a rebalance too long.
		fetches := cl.PollRecords(ctx, 10000)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			cl.AllowRebalance()
			return
		}
		fetches.EachError(func(_ string, _ int32, err error) {
			panic(err)
		})
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			tp := tp{p.Topic, p.Partition}

			// Since we are using BlockRebalanceOnPoll, we can be
			// sure this partition consumer exists:
			//
			// * onAssigned is guaranteed to be called before we
			// fetch offsets for newly added partitions
			//
			// * onRevoked waits for partition consumers to quit
			// and be deleted before re-allowing polling.
			s.consumers[tp].recs <- p
		})
		cl.AllowRebalance()
	}
}
