// Package wal is a write-ahead log, and the journal of a worklease.Manager:
// it appends records to segment files with group commit, makes them
// durable, and replays them after a crash, together with an optional
// snapshot of the state they build.
//
// It has two sides. Its format and its generic calls ([Log.Append],
// [Log.Replay], [Log.WriteSnapshot]) store a record as a kind and a
// payload of bytes, whose meaning they know nothing of. Its journal side
// makes a Log a worklease.Journal, and knows the Manager's records:
// [Log.AppendRecord] stores a worklease.Record as a record of kind
// [RecordKind], its payload the Record's binary form (see
// worklease.Record.AppendBinary), encoded straight into the log's buffer;
// the goroutine that writes the buffer (under SyncNone) fills in the
// records' CRCs, off the caller's path. Production code uses only the
// standard library and the worklease package.
//
//	l, err := wal.Open(dir)                           // recovers, locks the directory
//	m, err := worklease.New(worklease.WithJournal(l)) // replays it; m.Close closes it
//
// or, with records of its own:
//
//	err = l.Replay(loadSnapshot, applyRecord)   // rebuild the state
//	seq, err := l.Append(kind, payload)         // buffer a record, no I/O
//	err = l.Wait(seq)                           // durable, as the SyncMode defines it
//	err = l.WriteSnapshot(seq, saveState)       // now and then, to bound the log
//	err = l.Close()
//
// # Durability
//
// [Log.Append] assigns the next sequence number and buffers the record.
// [Log.Wait] makes it durable. Under [SyncAlways], the default, Wait returns
// once the record is fsynced. Waiters share the work: the first to find no
// flush running becomes the leader, takes everything buffered, writes it with
// one write followed by a commit marker, calls fdatasync once, publishes the
// durable sequence number and wakes the others, whose records went out in the
// same batch or who elect the next leader. Nobody waits on a timer. Under
// [SyncInterval], Wait returns once the record is written to the operating
// system, which keeps it through a crash of the process, and a goroutine
// fsyncs every interval. Under [SyncNone], Wait does no I/O and returns once
// the record is appended; a goroutine writes what is buffered to the
// operating system every 10ms (sooner when much is buffered), without an
// fsync, so a crash of the process loses about the last 10ms of records.
// [SyncMode] says what each mode can lose.
//
// If a write, fsync or directory operation fails, the log fails closed: that
// call and every later one return an error wrapping [ErrFailed] and the cause,
// nothing that is not durable is acknowledged, and an fsync is never retried on
// a file in an unknown state. To recover, Close the log and Open it again.
//
// # Recovery
//
// [Open] reads every segment and checks every record. A crash can leave a
// torn tail in the last segment: a partial record, zeroed or invalid bytes, or
// a batch without its commit marker. Open cuts it back to the end of the last
// committed batch and reports it in [Log.Recovery]; those records were never
// acknowledged under SyncAlways. A damaged record followed by a commit marker
// that says the damaged bytes had been synced, damage to a sealed segment or to
// the snapshot, and records missing from the log are corruption: Open returns
// a [*CorruptionError] that names the file and byte offset and matches
// [ErrCorrupt], and truncates nothing. The reason wraps one of
// [ErrZeroedRecord], [ErrInvalidRecord], [ErrUnexpectedEOF], [ErrUncommitted],
// [ErrBadHeader] and [ErrMissingSegment]. Under SyncAlways every batch says the
// one before it was synced, so only damage to the very last batch is taken for
// a torn write; under the weaker modes, damage to batches written since the
// last fsync is.
//
// No bytes make Open or Replay panic, and a length field can never make them
// allocate more than the file holds: every length is checked against the
// segment's maximum record size and the bytes left in the file first.
//
// # Snapshots
//
// [Log.WriteSnapshot] stores the caller's whole state as of a sequence number,
// atomically (temporary file, fsync, rename, fsync of the directory), and then
// removes the segments that hold only records it covers. [Log.Replay] hands
// back the latest snapshot and the records after it. [Log.Stats] reports how
// many records and bytes a replay would read, to decide when to snapshot.
//
// # Directory layout
//
// The directory belongs to one Log at a time, which holds an exclusive lock on
// its LOCK file (flock on Unix; elsewhere only within the process), and a Log
// to one worklease.Manager: [Log.ReplayRecords] refuses a second Manager with
// [ErrInUse]. Files the log does not name are left alone.
//
// A Log opened [WithReadOnly] only looks: it holds a shared lock instead, which
// keeps writers out but not other readers, creates and repairs nothing, and
// refuses to write with [ErrReadOnly]. The worklease-wal command uses it to
// inspect and verify a journal.
//
// # Permissions
//
// A log is private by default: records hold whatever their writer put in
// them (a journal's domain keys and failure causes, which often carry
// request data). Open creates the directory, and any parent it creates, with
// mode 0700, and the Log creates every file (LOCK, segments, snapshots and
// their temporary files) with mode 0600, before the umask. [WithGroupAccess]
// makes them 0750 and 0640, so that the directory's group can read the log.
// Existing directories and files keep their modes: a log created by an
// older release with 0755 and 0644 keeps opening, and only the files
// created since are private; chmod the rest to make it private too. Open
// refuses a directory that others may write to (o+w), who could replace the
// log's files, with [ErrWritableByOthers], and creates nothing in it; a
// read-only Open, which writes nothing, opens it. Windows has no such mode
// bits and is not checked.
//
//	LOCK                      locked by the open Log (shared by read-only Logs)
//	0000000000000001.wal      segment 1, named by its id in 16 hex digits
//	0000000000000002.wal      segment 2; ids grow by one and never repeat
//	snapshot                  the latest snapshot, if any
//	kept                      the segments the snapshot keeps for the records it refers to, if any
//	*.tmp                     a segment, snapshot or kept file being created; Open removes them
//
// # On-disk format
//
// All integers are little-endian. Every checksum is a CRC-32C (Castagnoli).
// The magic numbers, versions, sizes, field layouts, reserved kinds and file
// names below are part of the on-disk format; never change them.
//
// A segment is a 32-byte header followed by batches. Each batch is one or more
// records closed by a commit marker; batches never span segments, and a
// segment is synced before the next one is created.
//
//	segment:
//	+-----------+----------+----------+-----+--------+----------+-----+--------+-----
//	| header 32 | record   | record   | ... | commit | record   | ... | commit | ...
//	+-----------+----------+----------+-----+--------+----------+-----+--------+-----
//	            |<------------- batch ------------>|<--------- batch -------->|
//
//	segment header:
//	0        4          8             16            24           28         32
//	+--------+----------+-------------+-------------+------------+----------+
//	| "WLSG" | version  | segment id  | first seq   | max record | CRC-32C  |
//	|        | u32 = 1  | u64         | u64         | u32        | of 0..28 |
//	+--------+----------+-------------+-------------+------------+----------+
//
//	record (frame):
//	0          4          8      9            17
//	+----------+----------+------+------------+----------------------+
//	| length   | CRC-32C  | kind | seq        | payload              |
//	| u32      | u32      | u8   | u64        | length bytes         |
//	+----------+----------+------+------------+----------------------+
//	CRC-32C over bytes 0..4 (length), then 8..end (kind, seq, payload).
//	length <= the header's max record; kind 1..127 for records.
//
//	commit marker: a frame with kind 255, seq = the batch's last record,
//	and a 12-byte payload:
//	+-------------+-------------------+
//	| count u32   | synced offset u64 |
//	+-------------+-------------------+
//	count: records in the batch. synced offset: how many bytes of this
//	segment were known to be fsynced when the batch was written (never
//	past the batch's start).
//
// Kind 0 is never valid, so zeroed bytes never decode as a record; kinds 128
// to 254 are reserved. Sequence numbers start at 1 and grow by one per record
// across segments; a commit marker does not take one. The max record field
// makes a segment readable with the limit it was written with, whatever the
// current [WithMaxRecordSize].
//
//	snapshot (n bytes):
//	0        4          8           16                  n-12        n-4          n
//	+--------+----------+-----------+------ ... --------+-----------+------------+
//	| "WLSN" | version  | seq       | data              | data len  | CRC-32C    |
//	|        | u32 = 1  | u64       | n-28 bytes        | u64       | of 0..n-4  |
//	+--------+----------+-----------+------ ... --------+-----------+------------+
//
//	kept file (n bytes), written before the snapshot it names segments for
//	is renamed into place, and read only with a snapshot no newer:
//	0        4          8            16          20              n-4          n
//	+--------+----------+------------+-----------+-- ... --------+------------+
//	| "WLKP" | version  | snapshot   | count     | segment ids   | CRC-32C    |
//	|        | u32 = 1  | seq u64    | u32       | count × u64   | of 0..n-4  |
//	+--------+----------+------------+-----------+-- ... --------+------------+
//
// A Manager's snapshot may refer to records the snapshot covers, for the
// payloads they hold (see [Log.SnapshotStateKeeping] and
// [Log.ReadPayload]): the segments that hold them are kept, named in the
// kept file, and read only for those records; the other segments the
// snapshot covers are removed.
//
// # Concurrency
//
// A Log is safe for concurrent use. Under SyncInterval and SyncNone it starts
// one goroutine, which Close stops; under SyncAlways, none.
package wal
