package wal_test

import (
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/worklease/worklease/wal"
)

// Record kinds of this example; a journal defines its own, from wal.MinKind
// to wal.MaxKind.
const (
	kindGranted   uint8 = 1
	kindCompleted uint8 = 2
)

func ExampleLog_Append() {
	dir, err := os.MkdirTemp("", "wal-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	l, err := wal.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range []struct {
		kind    uint8
		payload string
	}{
		{kindGranted, "tenant-a/17"},
		{kindCompleted, "tenant-a/17"},
		{kindGranted, "tenant-b/3"},
	} {
		seq, err := l.Append(r.kind, []byte(r.payload))
		if err != nil {
			log.Fatal(err)
		}
		if err := l.Wait(seq); err != nil { // durable: fsynced
			log.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		log.Fatal(err)
	}

	// After a restart, or a crash: reopen and replay.
	l, err = wal.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	err = l.Replay(nil, func(seq uint64, kind uint8, payload []byte) error {
		fmt.Printf("%d: kind %d, %s\n", seq, kind, payload)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// 1: kind 1, tenant-a/17
	// 2: kind 2, tenant-a/17
	// 3: kind 1, tenant-b/3
}

func ExampleLog_WriteSnapshot() {
	dir, err := os.MkdirTemp("", "wal-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	l, err := wal.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	var last uint64
	for i := range 5 {
		if last, err = l.Append(kindGranted, fmt.Appendf(nil, "offset %d", i)); err != nil {
			log.Fatal(err)
		}
	}
	// The state built by records 1 to 4, in whatever encoding the caller
	// chooses. Record 5 stays in the log.
	err = l.WriteSnapshot(last-1, func(w io.Writer) error {
		_, err := io.WriteString(w, "offsets 0-3 granted")
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := l.Close(); err != nil {
		log.Fatal(err)
	}

	l, err = wal.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	err = l.Replay(func(seq uint64, data []byte) error {
		fmt.Printf("snapshot through %d: %s\n", seq, data)
		return nil
	}, func(seq uint64, kind uint8, payload []byte) error {
		fmt.Printf("%d: %s\n", seq, payload)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("records since the snapshot:", l.Stats().RecordsSinceSnapshot)
	// Output:
	// snapshot through 4: offsets 0-3 granted
	// 5: offset 4
	// records since the snapshot: 1
}

func ExampleLog_Recovery() {
	dir, err := os.MkdirTemp("", "wal-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	l, err := wal.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	seq, err := l.Append(kindGranted, []byte("tenant-a/1"))
	if err != nil {
		log.Fatal(err)
	}
	if err := l.Wait(seq); err != nil {
		log.Fatal(err)
	}
	if err := l.Close(); err != nil {
		log.Fatal(err)
	}

	// A crash in the middle of a write leaves part of a record behind.
	seg, err := os.OpenFile(filepath.Join(dir, "0000000000000001.wal"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := seg.Write([]byte{40, 0, 0, 0, 1, 2, 3}); err != nil {
		log.Fatal(err)
	}
	if err := seg.Close(); err != nil {
		log.Fatal(err)
	}

	l, err = wal.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	torn := l.Recovery().Torn
	fmt.Printf("cut %d bytes from %s: %v\n", torn.Bytes, torn.File, torn.Reason)
	fmt.Println("last record:", l.Recovery().LastSeq)
	// Output:
	// cut 7 bytes from 0000000000000001.wal: wal: unexpected EOF: 7 bytes left, a record header needs 17
	// last record: 1
}
