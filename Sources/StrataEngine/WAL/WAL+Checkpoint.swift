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
            var written: [(UInt32, Page)] = []
            written.reserveCapacity(plan.copies.count)
            let sorted = plan.copies.sorted { $0.page < $1.page }
            func image(_ i: Int) throws -> Page {
                let (number, frame) = sorted[i]
                let page = try checkpointSource(
                    number, frame: frame, generation: plan.generation, recent: recent, pager: pager)
                written.append((number, page))
                return page
            }
            try pager.writeRuns(count: sorted.count, number: { sorted[$0].page }, image: image)
            if plan.full {
                let size = try pager.main.size()
                let wanted = Int64(plan.pageCount) * Int64(pageSize)
                if size > wanted { try pager.main.truncate(to: wanted) }
            }
            if sync { try syncFile(pager.main) }
            let mainSize = try pager.main.size()
            lock.withLock {
                pager.mainFileResized(to: mainSize)
                for (number, page) in written {
                    pager.cache.put(PageCache.mainKey(number), page)
                    pager.mapped?.markVerified(number)
                }
            }
            checkpointed(to: plan.target)
            return plan.full
        } catch {
            if syncFailed { throw FsyncFailure(underlying: error) }
            throw error
        }
    }

    /// The image of log frame `frame` (page `number`) for a checkpoint.
    private func checkpointSource(
        _ number: UInt32, frame: Int, generation: UInt32, recent: RecentCommit?, pager: Pager
    ) throws -> Page {
        if let recent, recent.generation == generation, frame >= recent.firstFrame, frame - recent.firstFrame < recent.pages.count
        {
            let entry = recent.pages[frame - recent.firstFrame]
            if entry.number == number { return entry.page }
        }
        if let page = lock.withLock({ pager.cache.get(PageCache.frameKey(generation: generation, frame: frame)) }) {
            return page
        }
        let page = Page.zeroed(pageSize)
        guard try readFrame(frame, into: page), page.checksumMatches(pageNumber: number) else {
            throw StorageError.corrupt(page: number, reason: "WAL frame \(frame) unreadable during checkpoint")
        }
        return page
    }
}

/// An fsync failed during a checkpoint or a restart: the handle must stop
/// writing.
struct FsyncFailure: Error {
    var underlying: any Error
}
