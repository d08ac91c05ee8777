/// The writer's side of the log: checkpoints and restarts (publishing a
/// commit and stopping writes after a failed fsync are ``GroupCommit``'s).
extension Database {
    /// Copies committed pages from the log into the main file, as far as
    /// active readers of every handle allow. Runs automatically; call it to
    /// bound the log yourself. Waits for other handles' writers as
    /// ``beginWrite()`` does.
    public func checkpoint() throws {
        guard !options.readOnly else { throw StorageError.readOnly("opened read-only") }
        acquireGateWhenIdle()
        defer { gate.release() }
        try stateLock.withLock { if isClosed { throw StorageError.closed } }
        try wal.shared.lock(SharedIndex.writerLock, .exclusive, until: ContinuousClock.now + options.busyTimeout, store: path)
        defer { wal.shared.unlock(SharedIndex.writerLock) }
        try repairHoldingWriterLock()
        try checkpointLocked()
    }

    /// The checkpoint proper; the caller holds the writer lock.
    func checkpointLocked(recent: WAL.RecentCommit? = nil) throws {
        if let poisoned = stateLock.withLock({ groupCommit.poisoned }) { throw StorageError.readOnly(poisoned) }
        do {
            let full = try wal.checkpoint(
                into: pager, sync: options.durability != .none, syncLogFirst: options.durability == .normal, recent: recent)
            if let full {
                stateLock.withLock {
                    counters.checkpoints += 1
                    if !full { counters.partialCheckpoints += 1 }
                }
            }
        } catch let failure as FsyncFailure {
            groupCommit.poison("an fsync failed during a checkpoint: \(failure.underlying)")
            throw failure.underlying
        }
    }

    /// Restarts the log when it is empty, or every frame is in the main
    /// file and no reader of any handle can still need one. Called by the
    /// committing writer.
    func restartLogIfPossible() throws {
        do {
            if try wal.restartIfPossible(sync: options.durability != .none) {
                stateLock.withLock {
                    pager.cache.removeFrames()
                    counters.walRestarts += 1
                }
            }
        } catch let failure as FsyncFailure {
            groupCommit.poison("an fsync of the WAL header failed: \(failure.underlying)")
            throw failure.underlying
        }
    }

    /// Remembers the free-page set of the commit that will be at
    /// `position` once published (the caller holds the gate).
    func rememberFreelist(_ freelist: Freelist, position: UInt64) {
        var published = freelist
        published.changed = false
        committedFreelist = published
        freelistPosition = position
    }

    /// Takes the gate and waits until no commit of this handle is pending:
    /// for checkpoints, repairs and close, which need the log as published.
    func acquireGateWhenIdle() {
        gate.acquire()
        groupCommit.waitUntilIdle()
    }

    /// The automatic checkpoint after a commit that brought the log to the
    /// threshold: it waits for the gate and for the pending commits (both
    /// usually free), then runs as ``checkpoint()`` does when the writer
    /// lock is free. Failures are left for a later commit to retry (a
    /// failed fsync poisons the handle). `whatever`: checkpoint even when
    /// the log is below the threshold (the commit wrote the main file).
    ///
    /// With ``DatabaseOptions/checkpointsInBackground`` the run after a
    /// commit that only appended to the log goes to a thread of its own,
    /// and the commit returns once it is durable.
    func checkpointAfterCommit(recent: WAL.RecentCommit, whatever: Bool = false) {
        // Every commit appended while the log is past the threshold comes
        // here: with sixteen savers, one commit in 25 did, and each took the
        // gate and drained the group's pending commits only to find the
        // frames copied. One runs at a time, and only while frames are left
        // to copy; the others leave it to that one. A commit that wrote the
        // main file still runs its own.
        if !whatever {
            let due = stateLock.withLock {
                wal.state.frames >= options.checkpointThresholdFrames && wal.state.backfilled < wal.state.frames
            }
            guard due,
                automaticCheckpointRunning.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged
            else { return }
            if options.checkpointsInBackground {
                let pages = UncheckedSendable(value: recent)
                if detachThread({ [self] in runAutomaticCheckpoint(recent: pages.value, claimed: true, restart: true) }) {
                    return
                }
            }
        }
        runAutomaticCheckpoint(recent: recent, claimed: !whatever)
    }

    /// The automatic checkpoint proper, on the committing thread or on its
    /// own; `claimed`: it holds `automaticCheckpointRunning`. `restart`:
    /// on its own thread, it also restarts the log when the checkpoint
    /// copied every frame and no reader needs one, so that the next commit
    /// does not write and sync the log's header first (0.3–0.8 ms on this
    /// machine, before a fetch-modify-save's 4.9 MB of frames).
    private func runAutomaticCheckpoint(recent: WAL.RecentCommit, claimed: Bool, restart: Bool = false) {
        beforeAutomaticCheckpointGate?()
        acquireGateWhenIdle()
        // The claim ends before the gate opens: a commit appended after
        // this checkpoint finds the claim free when its own check runs.
        defer {
            if claimed { automaticCheckpointRunning.store(false, ordering: .releasing) }
            gate.release()
        }
        // A checkpoint of its own thread may find the handle closed (close
        // takes the gate, and checkpoints itself).
        if stateLock.withLock({ isClosed }) { return }
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
        guard !claimed || stateLock.withLock({ wal.state.frames >= options.checkpointThresholdFrames }) else { return }
        try? checkpointLocked(recent: recent)
        // A failed sync of the header poisons the handle, as the checkpoint's
        // does; anything else leaves the restart to the next commit.
        if restart { try? restartLogIfPossible() }
    }
}

/// A value handed to another thread whose type the compiler cannot prove
/// safe to send: a commit's page images, which nothing writes again once
/// the commit is published.
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
}
