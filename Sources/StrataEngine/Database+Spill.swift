/// Spilling: a write transaction whose private pages outgrow the budget
/// (``DatabaseOptions/cacheSizeBytes``) writes some of them out and reads
/// them back when it needs them again, so its memory stays bounded. Branch
/// pages stay in memory (every descent reads them; they are about one in a
/// hundred pages).
///
/// Pages that existed before the transaction go to the log, after this
/// handle's pending commits, as frames that are not a commit (their commit
/// field is 0): no reader sees them, as they are not published; recovery
/// keeps them only when the transaction's commit frame follows them, and a
/// rollback or a crash leaves them to be overwritten. The commit publishes
/// them with its own frames (a page's newest frame wins), and no restart of
/// the log happens while they are in it.
///
/// *Fresh* pages go to the main file instead: pages numbered at or past
/// the *fresh floor*, the first page number that no committed state, no
/// pending commit, no frame of the log and no byte of the main file holds.
/// No reader of any handle can read such a page (every reader's page count
/// is below the floor), no checkpoint copies one (no frame names it), so
/// the transaction writes it straight into the main file at its final
/// place, and writes it there again if it changes it again. A bulk load
/// into a new tree, the case that outgrows memory, allocates nearly all
/// its pages there, and each of them is written once instead of twice
/// (log, then checkpoint).
///
/// Leaves that existed before the transaction move to fresh pages when
/// the store had few free pages as it began (see
/// `WriteTransaction.relocateLeaves(_:)`): they are then written once, as
/// fresh pages are, instead of into the log and again at the checkpoint.
///
/// Which pages go: fresh ones first, the highest-numbered of them, so
/// that the lowest-numbered stay in memory for good; then, if that is not
/// enough, the oldest-held of the others. Once a transaction has spilled,
/// its puts and deletes are buffered and applied in key order (see
/// ``WriteTransaction/put(_:_:in:)`` and ``WriteTransaction/delete(_:in:)``):
/// a load of random keys into a tree larger than the budget then reads each
/// spilled leaf back about once per buffer instead of once per put. Measured
/// on the 1M-entry load of `engine-bench` (random 16-byte keys, a 64 MiB
/// budget): spilling alone read back 485k pages and took 1.7–2.1× as long
/// as holding every page; with the buffer and this order, 148k pages and no
/// longer than holding every page. Its 100k random deletes wrote 237.6 MiB
/// of log (each leaf spilled, read back and written again) before deletes
/// were buffered, 144.6 MiB after (each leaf about once), and none since
/// leaves move: the main file grows by 128.5 MiB instead.
///
/// At commit a transaction that spilled writes its remaining fresh pages
/// into the main file too, syncs the main file (unless durability is
/// `none`), and only then appends its other pages and the header (whose
/// page count now covers the fresh pages) to the log as one commit. A
/// crash before the commit frame is durable leaves bytes past the page
/// count of every committed state, which nothing reads; the next writer
/// allocates over them. A rollback leaves the same.
extension Database {
    /// Private pages a write transaction holds before it spills: the page
    /// cache's budget in pages, at least 16.
    var spillLimitPages: Int { max(16, options.cacheSizeBytes / pageSize) }

    /// The fresh floor (see above) for a transaction that began with
    /// `pageCount` pages and the pending pages `pending`. The caller is the
    /// writer (it holds the writer lock, so no other handle checkpoints,
    /// truncates or appends meanwhile).
    func freshPageFloor(pageCount: UInt32, pending: [UInt32: Page]) throws -> UInt32 {
        let mainPages = UInt32(clamping: (try pager.main.size() + Int64(pageSize) - 1) / Int64(pageSize))
        var floor = max(pageCount, mainPages)
        if let highest = stateLock.withLock({ wal.highestIndexedPage() }) { floor = max(floor, highest &+ 1) }
        if let highest = pending.keys.max() { floor = max(floor, highest &+ 1) }
        return floor
    }

    /// Writes fresh pages (sealed, sorted by number) into the main file,
    /// runs of consecutive pages in one write each. Forgets this handle's
    /// cached or checked images of those page numbers: whatever it knew of
    /// them predates these bytes.
    func writeFreshPages(_ pages: [(number: UInt32, page: Page)]) throws {
        stateLock.withLock {
            for (number, _) in pages {
                pager.cache.remove(PageCache.mainKey(number))
                pager.mapped?.clearVerified(number)
            }
        }
        let size = pageSize
        try pager.writeRuns(
            count: pages.count, writeback: options.durability != .none, number: { pages[$0].number },
            fill: { i, slot in slot.copyMemory(from: pages[i].page.bytes, byteCount: size) })
    }

    /// After a commit's own fresh pages were written into the main file and
    /// synced (see `WriteTransaction.takeFreshPagesToMainFile()`): keeps
    /// their images in the page cache and marks them checked in the
    /// mapping, as a checkpoint does for the pages it copies (this
    /// transaction built and checked them, and the file holds these bytes).
    /// Without it the reads after a bulk load checked every page again.
    /// Harmless if the commit then fails: the numbers lie past its page
    /// count, and whatever writes them later replaces both (a log frame is
    /// looked for first, a checkpoint or fresh write resets the entry).
    func adoptFreshPages(_ pages: [(number: UInt32, page: Page)]) throws {
        let size = try pager.main.size()
        stateLock.withLock { pager.adoptWrittenPages(pages, mainFileSize: size) }
    }

    /// Makes the fresh pages written so far durable before the commit that
    /// makes them reachable is written (unless durability is `none`). A
    /// failed sync poisons the handle, as a failed log sync does.
    func syncFreshPages() throws {
        guard options.durability != .none else { return }
        do {
            try pager.main.sync()
        } catch {
            groupCommit.poison("an fsync of the main file failed: \(error)")
            throw error
        }
    }

    /// Reads back fresh page `number` that a transaction spilled. Its
    /// checksum is checked (the disk may have damaged it); its structure is
    /// not checked again: the transaction built and checked it, and the
    /// checksum it sealed it with before writing matches. (Checking it
    /// again cost 350M of 10.7G instructions of a 1M-entry load.)
    func readSpilledPage(_ number: UInt32) throws -> Page {
        let page = Page.uninitialized(pageSize)
        let n = try pager.main.read(into: page.bytes, count: pageSize, at: Int64(number) * Int64(pageSize))
        guard n == pageSize else {
            throw StorageError.corrupt(page: number, reason: "a spilled page lies beyond the end of the file")
        }
        guard page.checksumMatches(pageNumber: number) else {
            throw StorageError.corrupt(page: number, reason: "checksum mismatch (a spilled page)")
        }
        stateLock.withLock { counters.spillReads += 1 }
        return page
    }
}

extension Database {
    /// Reads back page `number` that a transaction spilled to the log as
    /// frame `frame` (not a commit, not published), its checksum checked
    /// as ``readSpilledPage(_:)`` checks it.
    func readSpilledFrame(_ frame: Int, page number: UInt32) throws -> Page {
        let page = Page.uninitialized(pageSize)
        guard try wal.readFrame(frame, into: page) else {
            throw StorageError.corrupt(page: number, reason: "a spilled WAL frame \(frame) lies beyond the end of the log")
        }
        guard page.checksumMatches(pageNumber: number) else {
            throw StorageError.corrupt(page: number, reason: "checksum mismatch (spilled WAL frame \(frame))")
        }
        stateLock.withLock { counters.spillReads += 1 }
        return page
    }
}
