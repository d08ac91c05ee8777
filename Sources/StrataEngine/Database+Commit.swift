/// The writer's side of the log: checkpoints, restarts, publishing a
/// commit, and stopping writes after a failed fsync.
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
        if let poisoned = stateLock.withLock({ poisoned }) { throw StorageError.readOnly(poisoned) }
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
            poison("an fsync failed during a checkpoint: \(failure.underlying)")
            throw failure.underlying
        }
    }

    /// After an fsync failure nothing the OS says about durability can be
    /// trusted: the handle stops writing. Reopening runs recovery.
    func poison(_ why: String) {
        stateLock.withLock { if poisoned == nil { poisoned = why } }
        forgetCatalogCache()
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
            poison("an fsync of the WAL header failed: \(failure.underlying)")
            throw failure.underlying
        }
    }

    /// Makes a written (and, as the durability level requires, synced)
    /// commit visible to every handle: publishes its frames in the shared
    /// index and caches its pages. `mainChanged`: the commit also wrote
    /// pages into the main file (it spilled). `firstFrame` is the commit's
    /// first frame: its spilled frames (`spilled`, page numbers), then
    /// `pages`.
    func publish(
        pages: [(number: UInt32, page: Page)], firstFrame: Int, spilled: [UInt32], tail: WAL.LogTail,
        header: FileHeader, mainChanged: Bool
    ) {
        _ = wal.publish(
            pages, first: firstFrame, spilled: spilled, chain: tail.chain, header: header, mainChanged: mainChanged
        ) { state in
            let firstPage = firstFrame + spilled.count
            for (i, entry) in pages.enumerated() {
                pager.cache.put(PageCache.frameKey(generation: state.generation, frame: firstPage + i), entry.page)
            }
            counters.commits += 1
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
}
