// The commit, step by step (see `commit()`), and the rollback.

extension WriteTransaction {
    /// Makes every change durable (per the store's ``Durability``) and
    /// visible to transactions that begin afterwards. On error nothing is
    /// visible and the store stays at the previous commit; the transaction
    /// is over either way. A transaction that failed part-way through a
    /// change (see the type's documentation) is rolled back and throws
    /// ``StorageError/transactionFailed(_:)``.
    public func commit() throws {
        if ended { throw StorageError.transactionEnded }
        applyBufferedChangesForCommit()
        // Set once the commit is pending: the gate is released then, and
        // the writer lock belongs to the group (see `GroupCommit`).
        var handedOver = false
        defer {
            if !handedOver {
                ended = true
                dirty.removeAll()
                db.endWrite()
            }
        }
        if let failure { throw StorageError.transactionFailed(failure) }
        guard !dirty.isEmpty || freelist.changed || !changedTrees.isEmpty else { return }
        try relocateHeldLeaves()
        try writeCatalogAndFreelist()
        let sealed = try sealPages()
        let appended = try appendToLog(sealed)
        guard db.options.durability == .full else {
            publishAndCheckpoint(appended)
            return
        }
        let ticket: UInt64
        do {
            ticket = try queueForSharedSync(appended)
        } catch {
            appended.write?.discard()
            throw error
        }
        handedOver = true
        try awaitSharedSync(ticket, write: appended.write)
        committedStamp = db.stamp(generation: appended.generation, frames: appended.tail.frames)
        if appended.checkpointDue { db.checkpointAfterCommit(recent: appended.recent, whatever: sealed.wroteMain) }
    }

    /// The commit's first step: changes still buffered are applied; one
    /// that fails becomes the transaction's failure, thrown by the commit.
    func applyBufferedChangesForCommit() {
        guard failure == nil && bufferedChanges != 0 else { return }
        do { try applyBufferedChanges() } catch { if failure == nil { failure = "\(error)" } }
    }

    /// Records each changed tree's root and count in the catalog, and the
    /// free pages in the freelist trunks.
    func writeCatalogAndFreelist() throws {
        // From the name's own bytes and a value on the stack: two arrays
        // a tree, each with the runtime's metadata lookup, cost about
        // 1,600 instructions.
        try withUnsafeTemporaryAllocation(byteCount: Self.catalogValueSize, alignment: 8) { value in
            for (root, name) in changedTrees.sorted(by: { $0.key < $1.key }) {
                Self.writeCatalogValue(root: root, count: counts[root] ?? 0, into: value.baseAddress!)
                var name = name
                try name.withUTF8 { key in
                    _ = try BTreeWriter(tx: self).putRaw(
                        UnsafeRawBufferPointer(key), UnsafeRawBufferPointer(value), root: FileHeader.catalogRoot)
                }
            }
        }
        try persistFreelist()
    }

    /// The pages a commit logs, sealed, in page order.
    struct SealedPages {
        var pages: [(number: UInt32, page: Page)]
        /// True when the transaction spilled: its fresh pages went to the
        /// main file (written and synced by ``sealPages()``).
        let wroteMain: Bool
    }

    /// Writes the header into page 0 when it changed, seals every dirty
    /// page's checksum, and writes and syncs the fresh pages of a
    /// transaction that spilled to the main file before any log frame
    /// can reach them.
    func sealPages() throws -> SealedPages {
        let freshAtCommit = try takeFreshPagesToMainFile()
        let wroteMain = freshSpilled > 0 || freshAtCommit || movedAtCommit > 0
        // Page 0 is logged only when the header changed: a small commit then
        // costs one frame per changed tree page plus the catalog page. A
        // transaction that spilled always logs it: its commit frames then
        // never come out empty.
        if header != snapshot.header || freshFloor != .max {
            header.commitCounter &+= 1
            header.write(to: try writable(0))
        }
        var pages: [(number: UInt32, page: Page)] = []
        pages.reserveCapacity(dirty.count)
        for (number, page) in zip(dirty.numbers, dirty.pages) { pages.append((number, page)) }
        pages.sort { $0.number < $1.number }
        for (number, page) in pages { page.sealChecksum(pageNumber: number) }
        if wroteMain {
            // Its fresh pages go where the spilled ones went, and are
            // durable before the commit that reaches them is written.
            let split = pages.partition { $0.number >= freshFloor }
            let fresh = pages[split...].sorted { $0.number < $1.number }
            pages.removeSubrange(split...)
            pages.sort { $0.number < $1.number }
            try db.writeFreshPages(fresh)
            try db.syncFreshPages()
            if freshAtCommit {
                try db.adoptFreshPages(fresh)
                db.stateLock.withLock { db.counters.freshPagesWrittenToMainFile += fresh.count }
            }
        }
        return SealedPages(pages: pages, wroteMain: wroteMain)
    }

    /// The fewest pages new to the file (see ``takeFreshPagesToMainFile()``)
    /// that a commit writes straight into the main file: 1 MiB of 4 KiB
    /// pages, or a quarter of the budget when that is less. Below it the
    /// main file's extra sync and the checkpoint that follows cost more
    /// than writing the pages twice.
    var freshPagesForMainFile: Int { min(256, spillLimit / 4) }

    /// A commit that did not spill but holds at least
    /// ``freshPagesForMainFile`` pages new to the file (at or past the
    /// fresh floor: no committed state, no reader and no pending commit
    /// can reach them) writes them into the main file, as a spill does,
    /// instead of logging them and copying them there at the checkpoint:
    /// a bulk load of 100,000 entries (13 MiB) wrote every page twice.
    /// Sets ``freshFloor`` and returns true when it does; the commit then
    /// writes and syncs them before its frames (``sealPages()``).
    func takeFreshPagesToMainFile() throws -> Bool {
        guard freshFloor == .max, dirty.count >= freshPagesForMainFile else { return false }
        let floor = try db.freshPageFloor(pageCount: snapshot.header.pageCount, pending: pendingPages)
        var fresh = 0
        for number in dirty.numbers where number >= floor { fresh += 1 }
        guard fresh >= freshPagesForMainFile else { return false }
        freshFloor = floor
        return true
    }

    /// A commit appended to the log, not yet durable or published.
    struct AppendedCommit {
        let sealed: SealedPages
        let tail: WAL.LogTail
        /// The first frame readers take this commit's pages from (its
        /// spilled frames' first when it spilled).
        let first: Int
        let generation: UInt32
        let recent: WAL.RecentCommit
        let checkpointDue: Bool
        /// Its frames, when they are written after the gate is released.
        let write: WAL.FrameWrite?
    }

    /// Appends the sealed pages to the log as one commit, after the
    /// pending commits of this handle and this transaction's spilled
    /// frames (the log restarts first when nothing is pending), and
    /// remembers the freelist and catalog it leaves.
    func appendToLog(_ sealed: SealedPages) throws -> AppendedCommit {
        let pages = sealed.pages
        let pendingTail = spillTail ?? db.groupCommit.tail
        if pendingTail == nil { try db.restartLogIfPossible() }
        // A small commit that waits for the group's sync writes its frames
        // after it releases the gate (``awaitSharedSync(_:write:)``): the
        // next writer's transaction runs meanwhile.
        let deferring = db.options.durability == .full && spillTail == nil && !sealed.wroteMain
        let (tail, write) =
            deferring
            ? try db.wal.appendCommitDeferringWrite(pages, pageCount: header.pageCount, after: pendingTail)
            : (try db.wal.appendCommit(pages, pageCount: header.pageCount, after: pendingTail), nil)
        let pagesFirst = tail.frames - pages.count
        let first = spillTail == nil ? pagesFirst : spillStart
        let generation = db.stateLock.withLock { db.wal.state.generation }
        let position = SharedIndex.State.position(generation: generation, frames: tail.frames)
        db.rememberFreelist(freelist, position: position)
        if let catalogBase {
            db.catalog.advance(from: catalogBase, to: position, changed: changedTrees, counts: counts)
        }
        let recent = WAL.RecentCommit(firstFrame: pagesFirst, generation: generation, pages: pages)
        // A commit that wrote pages into the main file was a large one
        // whatever its frame count: it checkpoints, so readers find the
        // whole store in the main file again (they then read it through
        // the mapping without looking in the log; point reads after a
        // spilled 1M load took 1.9 µs instead of 1.0 without this).
        let checkpointDue = tail.frames >= db.options.checkpointThresholdFrames || sealed.wroteMain
        return AppendedCommit(
            sealed: sealed, tail: tail, first: first, generation: generation, recent: recent,
            checkpointDue: checkpointDue, write: write)
    }

    /// Durability below `full`: nothing to wait for, so the commit is
    /// published now, under the gate, and checkpoints when due.
    func publishAndCheckpoint(_ commit: AppendedCommit) {
        db.groupCommit.publish(
            pages: commit.sealed.pages, firstFrame: commit.first, spilled: spilledOrder, tail: commit.tail,
            header: header, mainChanged: commit.sealed.wroteMain)
        committedStamp = db.stamp(generation: commit.generation, frames: commit.tail.frames)
        if commit.checkpointDue {
            // The commit is published already; a failed checkpoint is
            // retried after a later commit (or poisons the handle if an
            // fsync failed).
            try? db.checkpointLocked(recent: commit.recent)
        }
    }

    /// Queues the commit for the group's next sync; returns its ticket.
    func queueForSharedSync(_ commit: AppendedCommit) throws -> UInt64 {
        try db.groupCommit.enqueue(
            GroupCommit.Entry(
                ticket: 0, pages: commit.sealed.pages, first: commit.first, tail: commit.tail, header: header,
                freelist: freelist, mainChanged: commit.sealed.wroteMain, spilled: spilledOrder,
                written: commit.write == nil),
            after: continuedFrom)
    }

    /// Group commit, once the commit is queued (`ticket`): the transaction
    /// is over, the next writer comes in, this thread writes the commit's
    /// frames when their write was deferred (`write`; with 16 threads
    /// saving, the `pwrite` took about a fifth of the time a writer held
    /// the gate), then waits for a sync that covers the commit (its own or
    /// another's), which publishes it.
    func awaitSharedSync(_ ticket: UInt64, write: WAL.FrameWrite?) throws {
        ended = true
        dirty.removeAll()
        if spillTail == nil {
            db.gate.release()
            if let write {
                do {
                    try write.write()
                    db.groupCommit.wrote(ticket, error: nil)
                } catch {
                    db.groupCommit.wrote(ticket, error: error)
                }
            }
            try db.groupCommit.awaitPublished(ticket)
        } else {
            // Published before the next writer of this handle begins: its
            // continuation reads pending commits' pages from memory, and
            // this commit's spilled ones are only in the log.
            defer { db.gate.release() }
            try db.groupCommit.awaitPublished(ticket)
        }
    }

    /// Discards every change and ends the transaction.
    public func rollback() {
        guard !ended else { return }
        ended = true
        changeBuffers.removeAll()
        bufferedChanges = 0
        dirty.removeAll()
        db.endWrite()
    }

    /// Rewrites the freelist trunks after cutting free pages off the end.
    func persistFreelist() throws {
        guard freelist.changed else { return }
        header.pageCount = freelist.releaseTail(pageCount: header.pageCount)
        for number in dirty.numbers where number >= header.pageCount { dirty.remove(number) }
        let trunks = freelist.layout(pageSize: db.pageSize)
        for (i, trunk) in trunks.enumerated() {
            let page = Page.zeroed(db.pageSize)
            page.setU8(4, PageType.freelistTrunk.rawValue)
            page.setU32(8, i + 1 < trunks.count ? trunks[i + 1].trunk : 0)
            page.setU32(12, UInt32(trunk.entries.count))
            var offset = Layout.trunkHeaderSize
            for p in trunk.entries {
                page.setU32(offset, p)
                offset += 4
            }
            dirty[trunk.trunk] = page
        }
        header.freelistHead = trunks.first?.trunk ?? 0
        header.freeCount = UInt32(freelist.count)
    }
}
