extension WAL {
    /// The pages of the commit that triggered a checkpoint: a large commit
    /// may have pushed its own pages out of the cache, and re-reading them
    /// from the log would be wasted I/O.
    struct RecentCommit {
        var firstFrame: Int
        var generation: UInt32
        var pages: [(number: UInt32, page: Page)]
    }

    /// Copies committed frames into the main file as far as the readers of
    /// every handle allow (see ``planCheckpoint()``), truncates the file
    /// when the whole log is in it, syncs it (unless `sync` is false), and
    /// publishes the new backfilled count. Returns nil when there was
    /// nothing to copy, else whether the checkpoint reached the last
    /// commit. The caller holds the writer lock. Throws
    /// ``FsyncFailure`` wrapping an fsync failure, so the caller can
    /// poison the handle.
    func checkpoint(into pager: Pager, sync: Bool, syncLogFirst: Bool, recent: RecentCommit? = nil) throws -> Bool? {
        guard let plan = try planCheckpoint() else { return nil }
        var syncFailed = false
        func syncFile(_ file: any StorageFile) throws {
            do { try file.sync() } catch {
                syncFailed = true
                throw error
            }
        }
        do {
            // The log must be durable before the main file changes: a crash in
            // the middle of the copy is repaired by replaying it.
            if syncLogFirst { try syncFile(lock.withLock { file }) }
            // Mapped views of these pages stop counting as checked until the
            // copy has succeeded (a failed write may leave them half new).
            lock.withLock { for (number, _) in plan.copies { pager.mapped?.clearVerified(number) } }
            // Images held in memory (the commit's own pages, cached frames)
            // are cached as the main file's afterwards. Frames read back
            // from the log go straight into the write's buffer: a page each
            // for a large checkpoint (tens of thousands after a transaction
            // that spilled) took most of its time in fresh memory, and held
            // all of them at once.
            var written: [(number: UInt32, page: Page)] = []
            var readBack: [UInt32] = []
            let sorted = plan.copies.sorted { $0.page < $1.page }
            func fill(_ i: Int, _ slot: UnsafeMutableRawPointer) throws {
                let (number, frame) = sorted[i]
                if let page = heldImage(number, frame: frame, generation: plan.generation, recent: recent, pager: pager) {
                    slot.copyMemory(from: page.bytes, byteCount: pageSize)
                    written.append((number, page))
                    return
                }
                guard try readFrame(frame, into: slot), Page.checksum(slot, size: pageSize, pageNumber: number) == loadBE32(slot)
                else {
                    throw StorageError.corrupt(page: number, reason: "WAL frame \(frame) unreadable during checkpoint")
                }
                readBack.append(number)
            }
            try pager.writeRuns(count: sorted.count, writeback: sync, number: { sorted[$0].page }, fill: fill)
            if plan.full {
                let size = try pager.main.size()
                let wanted = Int64(plan.pageCount) * Int64(pageSize)
                if size > wanted { try pager.main.truncate(to: wanted) }
            }
            if sync { try syncFile(pager.main) }
            let mainSize = try pager.main.size()
            lock.withLock { pager.adoptWrittenPages(written, uncached: readBack, mainFileSize: mainSize) }
            checkpointed(to: plan.target)
            return plan.full
        } catch {
            if syncFailed { throw FsyncFailure(underlying: error) }
            throw error
        }
    }

    /// The image of log frame `frame` (page `number`) for a checkpoint when
    /// this handle holds it in memory (the commit just made, or the page
    /// cache), else nil.
    private func heldImage(
        _ number: UInt32, frame: Int, generation: UInt32, recent: RecentCommit?, pager: Pager
    ) -> Page? {
        if let recent, recent.generation == generation, frame >= recent.firstFrame, frame - recent.firstFrame < recent.pages.count
        {
            let entry = recent.pages[frame - recent.firstFrame]
            if entry.number == number { return entry.page }
        }
        return lock.withLock { pager.cache.get(PageCache.frameKey(generation: generation, frame: frame)) }
    }
}

/// An fsync failed during a checkpoint or a restart: the handle must stop
/// writing.
struct FsyncFailure: Error {
    var underlying: any Error
}

extension WAL {
    /// What a checkpoint will copy: for each page, its latest frame below
    /// `target` frames, when that frame is not backfilled yet.
    struct CheckpointPlan {
        var target: Int
        var copies: [(page: UInt32, frame: Int)]
        var generation: UInt32
        var pageCount: UInt32
        var full: Bool
    }

    /// Plans a checkpoint as far as the readers of every handle allow, or
    /// nil when there is nothing to copy. Reader rule: a frame may
    /// overwrite the main file only when every live reader's position is
    /// at or after it — a reader of an older position that finds no frame
    /// of a page reads it from the main file and must find its old image
    /// there.
    func planCheckpoint() throws -> CheckpointPlan? {
        guard announceIfCurrent() else { return nil }
        let oldest = try shared.oldestMark()
        return lock.withLock {
            let position = min(oldest ?? state.position, state.position)
            guard UInt32(truncatingIfNeeded: position >> 32) == state.generation else { return nil }
            let target = Int(position & 0xffff_ffff)
            guard target > state.backfilled else { return nil }
            var copies: [(UInt32, Int)] = []
            for (page, frames) in index {
                var i = frames.count - 1
                while i >= 0 && frames[i] >= target { i -= 1 }
                if i >= 0 && frames[i] >= state.backfilled { copies.append((page, frames[i])) }
            }
            return CheckpointPlan(
                target: target, copies: copies, generation: state.generation, pageCount: state.pageCount,
                full: target == state.frames)
        }
    }

    /// Bumps the sequence word before reading the reader marks (see
    /// ``SharedIndex``), and returns true, when this handle holds the
    /// latest published state; else returns false and does nothing. The
    /// caller holds the writer lock, so no one publishes meanwhile.
    ///
    /// A checkpoint or restart works from this handle's state: planned from
    /// one another handle has moved past, it would copy older page images
    /// over newer ones in the main file and publish the older state. Every
    /// caller adopts the index after taking the writer lock; this check
    /// keeps a path that forgets from doing harm.
    func announceIfCurrent() -> Bool {
        lock.withLock {
            guard sequenceSeen == shared.sequence() else { return false }
            sequenceSeen = shared.announce()
            return true
        }
    }

    /// Publishes that frames below `target` are in the (synced) main file.
    func checkpointed(to target: Int) {
        var current = lock.withLock { state }
        current.backfilled = target
        current.checkpoints &+= 1
        lock.withLock { adoptOwn(current, sequence: shared.publish(current)) }
    }
}
