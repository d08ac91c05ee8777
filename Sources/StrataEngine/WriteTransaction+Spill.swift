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
        try spillToLog(victims)
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
        for (number, page) in victims { page.sealChecksum(pageNumber: number) }
        try db.writeFreshPages(victims)
        for (number, _) in victims { dirty.remove(number) }
        freshSpilled += victims.count
        db.stateLock.withLock { db.counters.spilledPages += victims.count }
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
