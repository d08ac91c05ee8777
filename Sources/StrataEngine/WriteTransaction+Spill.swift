// Spilling: when the transaction holds more dirty pages than its limit,
// the oldest go to the log (or, fresh ones, to the main file) and are
// read back from there.

extension WriteTransaction {
    /// Writes pages out of memory until an eighth of the budget is free,
    /// branch pages kept (every descent reads them): first fresh pages into
    /// the main file (see `Database+Spill.swift`), then, when those are not
    /// enough, pages that existed before the transaction into the log, as
    /// frames that are not a commit (see ``spillToLog(_:)``). Runs between
    /// changes only, never inside one: a change holds references to the
    /// pages it edits.
    func spill() throws {
        if freshFloor == .max {
            freshFloor = try db.freshPageFloor(pageCount: snapshot.header.pageCount, pending: pendingPages)
        }
        let target = spillLimit - spillLimit / 8
        try spillFresh(dirty.count - target)
        guard dirty.count > target else { return }
        var victims: [(number: UInt32, page: Page)] = []
        victims.reserveCapacity(dirty.count - target)
        for (number, page) in zip(dirty.numbers, dirty.pages)
        where number != 0 && number < freshFloor && page.u8(4) != PageType.branch.rawValue {
            victims.append((number, page))
            if victims.count == dirty.count - target { break }
        }
        guard !victims.isEmpty else { return }
        let (moved, kept) = try relocateLeaves(victims)
        if !moved.isEmpty { try writeOutFresh(moved) }
        if !kept.isEmpty { try spillToLog(kept) }
    }

    /// Seals held fresh pages (numbered at or past the fresh floor,
    /// ascending), writes them into the main file and lets them go: they
    /// are read back from there (``spilledImage(_:)``).
    private func writeOutFresh(_ pages: [(number: UInt32, page: Page)]) throws {
        for (number, page) in pages { page.sealChecksum(pageNumber: number) }
        try db.writeFreshPages(pages)
        for (number, _) in pages { dirty.remove(number) }
        freshSpilled += pages.count
        db.stateLock.withLock { db.counters.spilledPages += pages.count }
    }

    /// Moves leaves that existed before this transaction to page numbers
    /// past the fresh floor, as a copy-on-write engine (LMDB) moves every
    /// page it changes: each is then written once, into the main file at
    /// its new place, instead of into the log and again into the main
    /// file at the checkpoint. Its parent (a branch, held in memory) is
    /// pointed at the new number and the old number is freed: the
    /// committed state still reads the old page, which no write reaches
    /// before a later commit reuses it through the log. Only a
    /// transaction that spilled does this (its commit writes and syncs
    /// the main file anyway), and only when fewer than an eighth of the
    /// store's pages were free as it began: the file grows by the pages
    /// it moves (LMDB's grows the same way), later commits reuse the freed
    /// ones, and a large transaction that finds them still free logs its
    /// pages instead of growing the file again. The file then stays below
    /// about twice its live pages.
    ///
    /// A leaf is found from its first key by a descent from the root of
    /// each tree this transaction changed, branches only. Leaves that are
    /// empty or roots, pages of other kinds, and pages of trees this
    /// transaction did not change (the catalog) stay where they are and
    /// are returned in `kept`; so are all of them when the store's page
    /// count lies below the fresh floor (bytes past it in the main file
    /// or the log that nothing committed holds). `moved` holds the pages
    /// under their new numbers, ascending; the caller writes them.
    func relocateLeaves(
        _ victims: [(number: UInt32, page: Page)]
    ) throws -> (moved: [(number: UInt32, page: Page)], kept: [(number: UInt32, page: Page)]) {
        guard freshFloor != .max, header.pageCount >= freshFloor, !changedTrees.isEmpty,
            freeAtStart < Int(snapshot.header.pageCount) / 8
        else { return ([], victims) }
        let roots = changedTrees.keys.sorted()
        var heights: [UInt32: Int] = [:]
        var moved: [(number: UInt32, page: Page)] = []
        var kept: [(number: UInt32, page: Page)] = []
        for (number, page) in victims {
            let leaf = Node(page: page)
            guard number < freshFloor, leaf.isLeaf, leaf.count > 0, header.pageCount < UInt32.max - 1,
                let (parent, index) = try parentOfLeaf(number, firstKey: leaf.key(0), roots: roots, heights: &heights)
            else {
                kept.append((number, page))
                continue
            }
            let fresh = header.pageCount
            header.pageCount += 1
            Node(page: try writable(parent)).setChild(index, fresh)
            free(number)
            // Held under its new number until the caller writes it: a
            // later descent of this loop may pass through it.
            dirty[fresh] = page
            moved.append((fresh, page))
        }
        if !moved.isEmpty {
            // Cursors of this transaction hold page numbers: they find
            // their place again, as after any change.
            modifications += 1
            db.stateLock.withLock { db.counters.relocatedPages += moved.count }
        }
        return (moved, kept)
    }

    /// The branch that points at leaf `number` and the index of that
    /// pointer, found by descending each tree of `roots` towards the
    /// leaf's first key; nil when none does (the leaf is a root, or of a
    /// tree not in `roots`). `heights` remembers each tree's branch levels
    /// (no tree changes shape while leaves move), so that the descents
    /// after a tree's first read no leaf, which may have spilled.
    private func parentOfLeaf(
        _ number: UInt32, firstKey key: (UnsafeRawPointer, Int), roots: [UInt32], heights: inout [UInt32: Int]
    ) throws -> (UInt32, Int)? {
        for root in roots where root != number {
            let height = heights[root]
            var current = root
            var level = 0
            while level < (height ?? Cursor.maxDepth) {
                let branch = try treeNode(current)
                guard branch.isBranch else { break }
                let index = branch.childIndex(key.0, key.1)
                let child = branch.child(index)
                if child == number { return (current, index) }
                current = child
                level += 1
            }
            if height == nil { heights[root] = level }
        }
        return nil
    }

    /// At the commit of a transaction that spilled, moves the leaves it
    /// still holds that existed before it (see ``relocateLeaves(_:)``):
    /// the commit writes them into the main file with its other fresh
    /// pages instead of logging them (``movedAtCommit``).
    func relocateHeldLeaves() throws {
        guard freshFloor != .max else { return }
        var candidates: [(number: UInt32, page: Page)] = []
        for (number, page) in zip(dirty.numbers, dirty.pages)
        where number != 0 && number < freshFloor && page.u8(4) == PageType.leaf.rawValue {
            candidates.append((number, page))
        }
        // The moved pages stay held, under their new numbers.
        movedAtCommit += try relocateLeaves(candidates).moved.count
    }

    /// Writes up to `excess` fresh pages into the main file: the
    /// highest-numbered ones. The lowest-numbered stay in memory for good,
    /// so a load that visits every leaf again and again (each application
    /// of the put buffer walks them in key order) misses only the pages
    /// that do not fit, instead of losing each one just before it is needed
    /// again; and the victims, neighbours in the file, go out in long
    /// writes.
    func spillFresh(_ excess: Int) throws {
        // Numbers only: a spill runs every few thousand pages, and copying
        // page references (a retain and release each) costs more.
        var candidates: [UInt32] = []
        candidates.reserveCapacity(dirty.count)
        for (number, page) in zip(dirty.numbers, dirty.pages)
        where number >= freshFloor && page.u8(4) != PageType.branch.rawValue {
            candidates.append(number)
        }
        guard !candidates.isEmpty, excess > 0 else { return }
        candidates.sort()
        let victims = candidates.suffix(min(candidates.count, excess)).compactMap { number in
            dirty[number].map { (number: number, page: $0) }
        }
        try writeOutFresh(victims)
    }

    /// Appends pages that existed before this transaction to the log as
    /// frames that are not a commit, after the pending commits of this
    /// handle and this transaction's earlier spilled frames. No reader
    /// sees them (they are not published), recovery keeps them only when
    /// the transaction's commit frame follows, and a rollback leaves them
    /// to be overwritten. The log restarts first when it can (as a commit
    /// would): it cannot restart once this transaction's frames are in it.
    func spillToLog(_ victims: [(number: UInt32, page: Page)]) throws {
        var tail = spillTail
        if tail == nil {
            tail = db.groupCommit.tail
            if tail == nil { try db.restartLogIfPossible() }
        }
        for (number, page) in victims { page.sealChecksum(pageNumber: number) }
        let newTail = try db.wal.appendSpilled(victims, after: tail)
        if spillTail == nil { spillStart = newTail.frames - victims.count }
        var frame = newTail.frames - victims.count
        for (number, _) in victims {
            spilledFrames[number] = frame
            spilledOrder.append(number)
            dirty.remove(number)
            frame += 1
        }
        spillTail = newTail
        db.stateLock.withLock { db.counters.spilledPages += victims.count }
    }
}
