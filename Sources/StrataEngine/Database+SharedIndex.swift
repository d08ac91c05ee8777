/// How a handle joins the shared index of the log, keeps up with it and
/// repairs it (see ``SharedIndex`` for the format and its rules).
extension Database {
    /// Joins the shared index: the first handle (the open lock taken
    /// exclusively) builds it from the log; every other takes the open
    /// lock shared, claims a reader slot and adopts the index, rebuilding
    /// it if it cannot be trusted.
    func attach(deadline: ContinuousClock.Instant) throws {
        let shared = wal.shared
        if try shared.tryLock(SharedIndex.openLock, .exclusive) {
            try shared.ensureHeader()
            shared.clearMarks()
            try rebuildIndex()
            // Converts the exclusive lock: no other handle can have slipped in.
            _ = try shared.tryLock(SharedIndex.openLock, .shared)
        } else {
            try shared.lock(SharedIndex.openLock, .shared, until: deadline, store: path)
            // Measured under the lock: the first handle has made the file
            // whole by now (a size taken before could be stale).
            try shared.ensureHeader()
        }
        try shared.claimSlot()
        try synchronize(deadline: deadline)
    }

    /// Rebuilds the shared index from the log; the caller holds the writer
    /// lock or is the only handle.
    func rebuildIndex() throws {
        try wal.rebuild { contents in
            var last: (page: UInt32, frame: Int)?
            for commit in contents.commits { for entry in commit.frames where entry.page == 0 { last = entry } }
            let page = Page.zeroed(self.pageSize)
            if let last {
                guard try self.wal.readFrame(last.frame, into: page), page.checksumMatches(pageNumber: 0) else {
                    throw StorageError.corrupt(page: 0, reason: "WAL frame \(last.frame) unreadable")
                }
            } else {
                let n = try self.main.read(into: page.bytes, count: self.pageSize, at: 0)
                guard n == self.pageSize else {
                    throw StorageError.corruptFile(
                        "file is \(n) bytes: shorter than its header page")
                }
                guard page.checksumMatches(pageNumber: 0) else { throw StorageError.corruptFile("header page checksum mismatch") }
            }
            let header = try FileHeader(page: page)
            guard header.pageSize == self.pageSize else {
                throw StorageError.corrupt(page: 0, reason: "page size changed in the WAL")
            }
            return header
        }
        stateLock.withLock {
            pager.mainFileChangedElsewhere()
            if !isClosed { pager.cache.removeFrames() }
        }
    }

    /// Adopts the shared index's latest state. A damaged index, or one a
    /// dead writer left half-published, is rebuilt under the writer lock;
    /// waits no later than `deadline` for it.
    func synchronize(deadline: ContinuousClock.Instant) throws {
        while true {
            let outcome = stateLock.withLock { adopt() }
            switch outcome {
            case .current, .adopted: return
            case .busy, .damaged: try repairIndex(deadline: deadline)
            }
        }
    }

    /// ``WAL/refresh()`` and what follows from it; the caller holds
    /// `stateLock`.
    func adopt() -> WAL.Refresh {
        let outcome = wal.refresh()
        if case .adopted(let foreign) = outcome {
            if foreign { pager.mainFileChangedElsewhere() }
            wal.openLogIfMissing()
        }
        return outcome
    }

    /// Rebuilds the index if it is still broken once this handle holds the
    /// writer lock. A half-published state whose writer is alive is waited
    /// for instead.
    func repairIndex(deadline: ContinuousClock.Instant) throws {
        // A read inside this thread's own write transaction: the writer
        // lock is held already (waiting for it would wait forever).
        if gate.isHeldByCurrentThread {
            try repairHoldingWriterLock()
        } else if !wal.shared.isPrivate {
            // Only a dead writer leaves the sequence word odd for long; a
            // live one holds the writer lock.
            acquireGateWhenIdle()
            defer { gate.release() }
            try wal.shared.lock(SharedIndex.writerLock, .exclusive, until: deadline, store: path)
            defer { wal.shared.unlock(SharedIndex.writerLock) }
            try repairHoldingWriterLock()
        } else {
            try repairHoldingWriterLock()
        }
    }

    /// Rebuilds the index when it is broken or a restart was left pending;
    /// the caller holds the writer lock.
    func repairHoldingWriterLock() throws {
        let outcome = stateLock.withLock { adopt() }
        switch outcome {
        case .busy, .damaged:
            try rebuildIndex()
        case .current, .adopted:
            if stateLock.withLock({ wal.state.restartPending }) { try rebuildIndex() }
        }
    }

    /// The commit stamp of the state at `frames` frames of generation
    /// `generation` (see ``commitStamp()``).
    func stamp(generation: UInt32, frames: Int) -> UInt64 {
        let epoch = stateLock.withLock { wal.state.epoch }
        return (UInt64(generation) << 32 | UInt64(frames)) ^ epoch
    }

    /// A number that changes with every commit of any handle or process:
    /// equal stamps mean nothing was committed in between. (It is not a
    /// count, and a store whose log was emptied by its last handle may
    /// repeat an old one.) Costs no I/O when nothing changed.
    public func commitStamp() throws -> UInt64 {
        var deadline: ContinuousClock.Instant?
        while true {
            let stamp: UInt64? = try stateLock.withLock {
                if isClosed { throw StorageError.closed }
                switch adopt() {
                case .current, .adopted: return wal.state.position ^ wal.state.epoch
                case .busy, .damaged: return nil
                }
            }
            if let stamp { return stamp }
            let limit = deadline ?? ContinuousClock.now + options.busyTimeout
            deadline = limit
            try repairIndex(deadline: limit)
        }
    }
}
