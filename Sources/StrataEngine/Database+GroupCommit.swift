/// Group commit: with durability `full`, a commit's frames are appended to
/// the log under the writer gate, then the gate is released and the commit
/// waits for a sync of the log. The first waiter syncs (the *leader*) and
/// publishes every commit appended before its sync began; commits appended
/// while that sync runs wait for the next one, which one of them leads. A
/// lone committer pays one sync, as before; sixteen threads committing at
/// once pay a few.
///
/// Rules:
/// - A commit appended but not yet published (*pending*) is visible to the
///   next writer of this handle only: it reads the pending commits' pages
///   (``continuation()``) and appends after their frames. Readers
///   see a commit once it is durable and published.
/// - Pending commits are published in append order, by the leader alone,
///   holding the shared index's writer lock: this handle keeps the lock
///   from the first append until the last pending commit is published and
///   no writer of this handle is inside a transaction.
/// - A failed sync fails every pending commit (none is reported durable),
///   and poisons the handle: the frames past the published state are
///   ignored by recovery unless whole, and overwritten by the next writer.
/// - Restarts and checkpoints run only when nothing is pending.
///
/// Every field is guarded by `condition`: lock 6 of the order stated in
/// Lock.swift (after the writer gate and the shared writer lock, before the
/// database's state lock).
final class PendingCommits: @unchecked Sendable {
    /// One commit appended to the log and waiting for its sync.
    struct Entry {
        var ticket: UInt64
        var pages: [(number: UInt32, page: Page)]
        var first: Int
        var tail: WAL.LogTail
        var header: FileHeader
        var freelist: Freelist
        /// The commit wrote pages into the main file too (it spilled).
        var mainChanged: Bool
        /// Page numbers of the frames it spilled to the log, from `first`
        /// on (its pages follow them). A commit with spilled frames is
        /// published before its writer releases the gate, so no
        /// continuation ever needs them.
        var spilled: [UInt32]
    }

    private let condition = Condition()
    /// Appended, not yet published, in append order (the leader's batch
    /// stays here until it is published).
    private var entries: [Entry] = []
    private var nextTicket: UInt64 = 1
    /// Every ticket up to this one is published.
    private var publishedThrough: UInt64 = 0
    /// A leader is syncing and publishing.
    private var syncing = false
    /// Tickets up to `through` failed with `error`.
    private var failure: (through: UInt64, error: any Error)?
    /// This handle holds the shared index's writer lock for the group.
    private var lockHeld = false
    /// A write transaction of this handle is between its begin and its
    /// append (or rollback).
    private var writerInside = false

    /// What a writer beginning now continues from: the last pending
    /// commit's tail, header and free pages, and the pending pages by
    /// number (newest image). Nil when nothing is pending. The caller holds
    /// the gate.
    func continuation() -> (tail: WAL.LogTail, header: FileHeader, freelist: Freelist, overlay: [UInt32: Page])? {
        condition.withLock {
            guard let last = entries.last else { return nil }
            var overlay: [UInt32: Page] = [:]
            for entry in entries { for (number, page) in entry.pages { overlay[number] = page } }
            return (last.tail, last.header, last.freelist, overlay)
        }
    }

    /// The tail of the last pending commit, if any. The caller holds the
    /// gate.
    var tail: WAL.LogTail? { condition.withLock { entries.last?.tail } }

    /// A writer of this handle begins (the caller holds the gate): true
    /// when the group holds the writer lock already, false when the caller
    /// must take it (and then call ``lockTaken()``).
    func writerBegins() -> Bool {
        condition.withLock {
            writerInside = true
            return lockHeld
        }
    }

    /// The caller took the writer lock for this handle.
    func lockTaken() {
        condition.withLock { lockHeld = true }
    }

    /// The writer left without appending (a rollback, an empty or failed
    /// commit): the writer lock is released unless commits are pending.
    /// The caller holds the gate.
    func writerLeaves(unlock: () -> Void) {
        condition.withLock {
            writerInside = false
            releaseIfIdle(unlock)
        }
    }

    /// Appends a commit to the queue (the caller holds the gate, and wrote
    /// its frames after ``tail``); returns its ticket. Throws the error of
    /// a sync that failed meanwhile: the frames were written after commits
    /// that will never be published.
    func enqueue(_ entry: Entry) throws -> UInt64 {
        try condition.withLock {
            if let failure { throw failure.error }
            var entry = entry
            entry.ticket = nextTicket
            nextTicket += 1
            entries.append(entry)
            writerInside = false
            return entry.ticket
        }
    }

    private func releaseIfIdle(_ unlock: () -> Void) {
        if lockHeld && entries.isEmpty && !writerInside && !syncing {
            unlock()
            lockHeld = false
        }
    }

    /// Waits until nothing is pending and no leader is at work (the caller
    /// holds the gate, so nothing new is appended meanwhile).
    func waitUntilIdle() {
        condition.withLock {
            while !entries.isEmpty || syncing { condition.wait() }
        }
    }

    /// Returns once `ticket` is published; throws the sync's error when it
    /// failed. The caller leads a sync when none runs: `sync` syncs the
    /// log, `publish` publishes a batch (in order, under the writer lock
    /// the group holds), `unlock` releases that lock, `poison` stops the
    /// handle after a failed sync.
    func awaitPublished(
        _ ticket: UInt64, sync: () throws -> Void, publish: ([Entry]) -> Void, unlock: () -> Void,
        poison: (any Error) -> Void
    ) throws {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if ticket <= publishedThrough { return }
            if let failure, ticket <= failure.through { throw failure.error }
            if syncing {
                condition.wait()
                continue
            }
            // Lead: sync everything appended so far.
            syncing = true
            let batch = entries
            condition.unlock()
            var syncError: (any Error)?
            do { try sync() } catch { syncError = error }
            if let syncError {
                poison(syncError)
            } else {
                publish(batch)
            }
            condition.lock()
            if let syncError {
                // Nothing appended can be trusted any more: every pending
                // commit fails, and the handle refuses writes.
                failure = (nextTicket - 1, syncError)
                entries.removeAll()
            } else {
                entries.removeFirst(batch.count)
                publishedThrough = batch.last?.ticket ?? publishedThrough
            }
            syncing = false
            releaseIfIdle(unlock)
            condition.broadcast()
        }
    }
}

extension Database {
    /// Waits until this handle's commits appended before now are durable
    /// and published (see ``PendingCommits``) and returns; throws the
    /// sync's error when it failed, for this commit and every other one
    /// waiting on that sync.
    func awaitDurable(_ ticket: UInt64) throws {
        try pendingCommits.awaitPublished(
            ticket,
            sync: {
                try stateLock.withLock { wal.file }.sync()
                stateLock.withLock { counters.logSyncs += 1 }
            },
            publish: { batch in
                for entry in batch {
                    publish(
                        pages: entry.pages, firstFrame: entry.first, spilled: entry.spilled, tail: entry.tail,
                        header: entry.header, mainChanged: entry.mainChanged)
                }
            },
            unlock: { wal.shared.unlock(SharedIndex.writerLock) },
            poison: { error in poison("an fsync of the WAL failed: \(error)") })
    }

    /// Takes the gate and waits until no commit of this handle is pending:
    /// for checkpoints, repairs and close, which need the log as published.
    func acquireGateWhenIdle() {
        gate.acquire()
        pendingCommits.waitUntilIdle()
    }

    /// The automatic checkpoint after a commit that brought the log to the
    /// threshold: it waits for the gate and for the pending commits (both
    /// usually free), then runs as ``checkpoint()`` does when the writer
    /// lock is free. Failures are left for a later commit to retry (a
    /// failed fsync poisons the handle). `whatever`: checkpoint even when
    /// the log is below the threshold (the commit wrote the main file).
    func checkpointAfterCommit(recent: WAL.RecentCommit, whatever: Bool = false) {
        acquireGateWhenIdle()
        defer { gate.release() }
        beforeAutomaticCheckpoint?()
        // Another process's writer holds the lock: one of its commits, or
        // a later one here, checkpoints instead.
        guard (try? wal.shared.tryLock(SharedIndex.writerLock, .exclusive)) == true else { return }
        defer { wal.shared.unlock(SharedIndex.writerLock) }
        // The lock was free since this handle's commit was published: other
        // handles may have committed, checkpointed and restarted the log
        // meanwhile. A checkpoint planned from the state this handle last
        // saw would copy older page images over newer ones in the main
        // file and publish that stale state.
        do { try repairHoldingWriterLock() } catch { return }
        guard whatever || stateLock.withLock({ wal.state.frames >= options.checkpointThresholdFrames }) else { return }
        try? checkpointLocked(recent: recent)
    }
}
