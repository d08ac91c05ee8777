/// The one write transaction of a store: reads see its own changes; nothing
/// is visible to anyone else until ``commit()`` returns, and
/// ``rollback()`` (or a thrown error inside ``Database/write(_:)``)
/// discards everything.
///
/// Changed pages are private copies held in memory until commit. Past
/// the budget (``DatabaseOptions/cacheSizeBytes``) the transaction spills
/// changed pages (those it allocated past the end of the store into the
/// main file, the others into the log, uncommitted) and reads them back
/// when needed, so its memory stays bounded; a rollback or a crash discards
/// what it spilled.
///
/// A change that throws after it may have begun changing pages (a page it
/// needed could not be read, or was damaged) leaves the transaction
/// *failed*, as LMDB does: a split or merge cannot be half undone, so
/// every later use throws ``StorageError/transactionFailed(_:)`` and
/// ``commit()`` rolls back and throws it. A caller that catches such an
/// error inside ``Database/write(_:)`` therefore cannot commit half of a
/// change. Errors found before anything changes (a key too long, a bad
/// tree name, a missing tree) leave the transaction usable.
///
/// One thread uses a write transaction at a time (its writer holds the
/// handle's gate), so the state read on every page access and every put
/// skips the runtime's exclusivity checks (`@exclusivity(unchecked)`):
/// they were about 7,000 instructions of a one-object save.
public final class WriteTransaction: ReadTransaction {
    /// The position whose catalog this transaction started from: the
    /// snapshot's, or the last pending commit's when it continues from
    /// one; nil once it created, dropped or renamed a tree (its catalog is
    /// then its own).
    @exclusivity(unchecked) var catalogBase: UInt64?
    override var catalogPosition: UInt64? { catalogBase }
    /// Private, modified page images by page number.
    @exclusivity(unchecked) var dirty = DirtyPages()
    @exclusivity(unchecked) var header: FileHeader
    @exclusivity(unchecked) var freelist: Freelist
    /// After a commit that returned: the ``Database/commitStamp()`` the
    /// store had right after it (nil before, and after a rollback or an
    /// empty commit). Nothing else committed between this transaction's
    /// begin and this stamp.
    public internal(set) var committedStamp: UInt64?
    /// The pages of this handle's commits appended before this
    /// transaction began and not yet published (their sync is pending),
    /// newest image by page number; read before the snapshot's.
    @exclusivity(unchecked) var pendingPages: [UInt32: Page] = [:]
    /// The fresh floor once the transaction first spilled (see
    /// `Database+Spill.swift`), or once its commit took its fresh pages
    /// to the main file (`takeFreshPagesToMainFile()`): pages at or past
    /// it that are not in ``dirty`` are in the main file, written there by
    /// this transaction. `UInt32.max` before either.
    @exclusivity(unchecked) var freshFloor = UInt32.max
    /// The ticket of the pending commit this transaction continued from
    /// (see ``GroupCommit/continuation()``), 0 when none was pending.
    var continuedFrom: UInt64 = 0
    /// Private pages this transaction may hold before it spills.
    let spillLimit: Int
    /// Pages that existed before this transaction and that it spilled to
    /// the log as frames that are not a commit: the newest frame of each.
    @exclusivity(unchecked) var spilledFrames: [UInt32: Int] = [:]
    /// The page number of each frame this transaction spilled, in order,
    /// from `spillStart` on; and the log's tail after them.
    var spilledOrder: [UInt32] = []
    var spillStart = 0
    var spillTail: WAL.LogTail?
    /// Fresh pages written into the main file so far.
    var freshSpilled = 0
    /// Free pages of the store when the transaction began (see
    /// `relocateLeaves(_:)`).
    let freeAtStart: Int
    /// Leaves the commit moved past the fresh floor (see
    /// `relocateHeldLeaves()`), written into the main file with the
    /// commit's other fresh pages.
    var movedAtCommit = 0
    /// Puts and deletes held back once the transaction has spilled (see
    /// ``put(_:_:in:)`` and ``delete(_:in:)``), by tree root, in the order
    /// made; their count is `bufferedChanges`, and `bufferedBytes`
    /// estimates their memory (bounded by half the budget).
    @exclusivity(unchecked) var changeBuffers: [UInt32: ChangeBuffer] = [:]
    @exclusivity(unchecked) var bufferedBytes = 0
    /// Buffers applied and emptied, whose memory the next ones reuse.
    @exclusivity(unchecked) var spareChangeBuffers: [ChangeBuffer] = []

    /// The buffer of `tree`'s held-back changes, made (or a spare one
    /// taken) when it has none.
    @inline(__always) func changeBuffer(for tree: Tree) throws -> ChangeBuffer {
        if let buffer = changeBuffers[tree.root] { return buffer }
        let buffer: ChangeBuffer
        if let spare = spareChangeBuffers.popLast() {
            spare.reset(for: tree)
            buffer = spare
        } else {
            buffer = try ChangeBuffer(tree: tree, path: db.path)
        }
        changeBuffers[tree.root] = buffer
        return buffer
    }

    /// The memory a buffered put takes beside its key and value: its
    /// header and offset in the buffer, and its place in the sort that
    /// applies it (see ``ChangeBuffer``).
    static let bufferedPutOverhead = 32

    /// The digest of a key for the buffered deletes (see
    /// ``ChangeBuffer``): two CRC-32C of it with different seeds
    /// (hardware instructions; the array's own hashing took a quarter of
    /// a buffered delete).
    private static func deleteDigest(_ k: UnsafeRawBufferPointer) -> UInt64 {
        let p = k.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
        return UInt64(crc32c(0, p, k.count)) << 32 | UInt64(crc32c(0x9E37_79B9, p, k.count))
    }

    /// Pages this transaction holds in memory (for tests of its bound).
    package var heldPageCount: Int { dirty.count }
    /// Bytes the buffers of held-back changes hold, spare ones included
    /// (for tests of their bound).
    package var changeBufferBytes: Int {
        changeBuffers.values.reduce(0) { $0 + $1.capacity } + spareChangeBuffers.reduce(0) { $0 + $1.capacity }
    }
    /// Trees whose entry count changed: root → name.
    @exclusivity(unchecked) var changedTrees: [UInt32: String] = [:]
    /// Roots of the trees whose appends leave room to grow
    /// (``leaveRoomToGrow(in:)``); a few at most, so a list.
    @exclusivity(unchecked) var growthRoots: [UInt32] = []
    @exclusivity(unchecked) var modifications = 0
    /// Scratch space for building one cell.
    let cellBuffer: UnsafeMutableRawPointer
    /// The descent path's buffer, reused by each put and delete (see
    /// ``takePathScratch()``).
    @exclusivity(unchecked) var pathScratch: [(UInt32, Int)] = []

    /// ``pathScratch`` emptied, its capacity kept, for one descent; the
    /// caller hands it back (`defer { tx.pathScratch = path }`).
    @inline(__always) func takePathScratch() -> [(UInt32, Int)] {
        var path = pathScratch
        pathScratch = []
        path.removeAll(keepingCapacity: true)
        return path
    }
    /// The tree the last put or delete changed, whose entries in
    /// ``counts`` and ``changedTrees`` are known to exist.
    @exclusivity(unchecked) var lastTouched: (root: UInt32, name: String)?

    /// The instance number the next tree created or renamed gets (see
    /// ``Tree``).
    var nextTreeInstance: UInt32 = 1

    /// `direct`: the main file's mapping when it holds the whole published
    /// state (every frame of the log copied into it), of `directPages`
    /// pages; nil otherwise.
    init(
        db: Database, snapshot: Database.Snapshot, serial: UInt64, freelist: Freelist, direct: MappedMainFile?,
        directPages: UInt32
    ) {
        header = snapshot.header
        self.freelist = freelist
        self.freelist.changed = false
        freeAtStart = freelist.count
        cellBuffer = .allocate(byteCount: db.pageSize, alignment: 16)
        spillLimit = db.spillLimitPages
        catalogBase = snapshot.position
        super.init(db: db, snapshot: snapshot, serial: serial, direct: direct, directPages: directPages, writes: true)
    }

    /// Records that the tree at `root` is now the new tree `name` (created
    /// or renamed) and returns its handle.
    func newInstance(_ name: String, root: UInt32) -> Tree {
        treeInstances[root] = (name, nextTreeInstance)
        nextTreeInstance &+= 1
        return handle(name, root: root)
    }

    deinit {
        if !ended { rollback() }
        cellBuffer.deallocate()
    }

    override var modificationCount: Int { modifications }

    override var visiblePageCount: UInt32 { header.pageCount }

    /// True when this transaction reads page `number` from an image other
    /// than the main file's, or refuses it: one it changed (``dirty``),
    /// spilled, or holds from a pending commit, one at or past its fresh
    /// floor (written into the main file by itself), or one past its end
    /// (cut off). Any other page below ``directPages`` is, in the main file,
    /// the image the snapshot holds, and stays so for the transaction's
    /// life: while it holds the gate and the writer lock no checkpoint of
    /// any handle runs, and it writes the main file only at or past its
    /// fresh floor until its commit has made its last read.
    @inline(__always) final func holdsOwnImage(_ number: UInt32) -> Bool {
        number >= header.pageCount || number >= freshFloor || dirty[number] != nil
            || (!spilledFrames.isEmpty && spilledFrames[number] != nil)
            || (!pendingPages.isEmpty && pendingPages[number] != nil)
    }

    override func page(_ number: UInt32) throws -> Page {
        if let page = dirty[number] { return page }
        if let page = try spilledImage(number) { return page }
        return try committedPage(number)
    }

    /// Page `number` read back from where this transaction spilled it (a
    /// new copy, its own), or nil when it did not spill it.
    @inline(__always) func spilledImage(_ number: UInt32) throws -> Page? {
        if number >= freshFloor { return try db.readSpilledPage(number) }
        if !spilledFrames.isEmpty, let frame = spilledFrames[number] { return try db.readSpilledFrame(frame, page: number) }
        return nil
    }

    /// Page `number` as the commits before this transaction left it: a
    /// pending commit's image (see ``GroupCommit``), else the snapshot's.
    /// The snapshot's images are memoized as a reader's are: while this
    /// transaction holds the gate no checkpoint or restart runs, and a page
    /// it changes is found in `dirty` (or where it spilled) first.
    @inline(__always) func committedPage(_ number: UInt32) throws -> Page {
        if !pendingPages.isEmpty, let page = pendingPages[number] { return page }
        // A page past the end (cut off by this transaction) is refused
        // by the pager, memoized or not.
        if number < header.pageCount, let page = memoized(number) { return page }
        let page = try db.pager.page(number, at: snapshot.position, pageCount: header.pageCount)
        memoize(page, number)
        return page
    }

    override public func count(_ tree: Tree) throws -> Int {
        try checkOpen()
        try checkHandle(tree)
        if let n = counts[tree.root] { return n }
        return try super.count(tree)
    }

    // MARK: Writes

    /// Stores `value` under `key`, replacing any previous value.
    ///
    /// Once the transaction has spilled (see the type's documentation),
    /// puts are held in a buffer and applied in key order when it fills or
    /// when anything else uses the transaction (a read, a delete of the
    /// same tree, a cursor step, the commit): a large load then visits each
    /// leaf once per buffer instead of once per put. Every read sees the
    /// buffered puts. (Deletes join the buffer too: see ``delete(_:in:)``.)
    /// The key, value and tree are checked when the put is made; an error
    /// applying it (an I/O error) fails the transaction at the next use.
    public func put(_ key: [UInt8], _ value: [UInt8], in tree: Tree) throws {
        if ended { throw StorageError.transactionEnded }
        if let failure { throw StorageError.transactionFailed(failure) }
        try checkHandle(tree)
        if freshFloor != .max {
            guard key.count <= Database.maxKeyLength else {
                throw StorageError.keyTooLong(length: key.count, maximum: Database.maxKeyLength)
            }
            guard value.count <= Database.maxValueLength else {
                throw StorageError.valueTooLarge(length: value.count, maximum: Database.maxValueLength)
            }
            let buffer = try changeBuffer(for: tree)
            try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try buffer.appendPut(k, v) } }
            bufferedChanges += 1
            bufferedBytes += key.count + value.count + Self.bufferedPutOverhead
            if bufferedBytes >= bufferLimitBytes { try applyBufferedChanges() }
            return
        }
        try changing { try putNow(key, value, in: tree) }
    }

    /// Replaces the value stored under `key` with the one `body` makes from
    /// it, finding the key once for both; returns false, calling nothing
    /// and changing nothing, when `key` is absent.
    ///
    /// `body` reads the stored value in place (a copy when the value lies
    /// in overflow pages): the bytes are valid only during the call. An
    /// error `body` throws comes back as it was thrown, with nothing
    /// changed and the transaction still usable. `body` should not use the
    /// transaction; if it changes it, its value is stored by a
    /// ``put(_:_:in:)`` afterwards (the key is then present whatever the
    /// body did to it), and if it ends it, the update throws
    /// ``StorageError/transactionEnded``. Once the transaction has spilled,
    /// this is a ``ReadTransaction/get(_:in:)`` followed by a ``put(_:_:in:)``.
    public func update(
        _ key: [UInt8], in tree: Tree, _ body: (UnsafeRawBufferPointer) throws -> [UInt8]
    ) throws -> Bool {
        if freshFloor != .max {
            guard key.count <= Database.maxKeyLength else {
                throw StorageError.keyTooLong(length: key.count, maximum: Database.maxKeyLength)
            }
            guard let old = try get(key, in: tree) else { return false }
            try put(key, try old.withUnsafeBytes { try body($0) }, in: tree)
            return true
        }
        try checkOpen()
        try checkHandle(tree)
        let outcome: BTreeWriter.UpdateOutcome
        do {
            outcome = try changing {
                try key.withUnsafeBytes { k in try BTreeWriter(tx: self).update(k, root: tree.root, body) }
            }
        } catch let failure as BTreeWriter.UpdateFailure {
            throw failure.error
        }
        switch outcome {
        case .absent: return false
        case .updated: return true
        case .changedDuring(let value):
            try put(key, value, in: tree)
            return true
        }
    }

    /// True when `tree` is the tree the last put or delete changed: its
    /// count is loaded and it is recorded as changed.
    @inline(__always) private func touchedLast(_ tree: Tree) -> Bool {
        guard let last = lastTouched else { return false }
        return last.root == tree.root && last.name == tree.name
    }

    /// A put's change proper.
    @inline(__always) private func putNow(_ key: [UInt8], _ value: [UInt8], in tree: Tree) throws {
        try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try putNow(k, v, in: tree) } }
    }

    /// A put's change proper, from bytes the caller holds.
    @inline(__always) private func putNow(
        _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, in tree: Tree
    ) throws {
        // Consecutive puts into one tree skip the bookkeeping lookups but
        // the count's increment.
        if touchedLast(tree) {
            if try BTreeWriter(tx: self).putRaw(key, value, root: tree.root) {
                try Self.adjust(&counts[tree.root, default: 0], of: tree, by: 1)
            }
            return
        }
        try ensureCounted(tree)
        if try BTreeWriter(tx: self).putRaw(key, value, root: tree.root) {
            try Self.adjust(&counts[tree.root, default: 0], of: tree, by: 1)
            changedTrees[tree.root] = tree.name
            lastTouched = (tree.root, tree.name)
        }
    }

    /// The memory the change buffer may take before it is applied: half
    /// the budget. Each application walks the tree's leaves in key order,
    /// reading back the ones spilled since the last: a 1M random-key load
    /// with the default budget read back 148,183 pages with a quarter,
    /// 89,047 with half (and 44,390 with all of it, for 33 MiB more),
    /// when each buffered put was two arrays (96 bytes beside its key and
    /// value); half holds 1.4 times as many puts in ``ChangeBuffer``, and
    /// the same load reads back 73,978 pages.
    var bufferLimitBytes: Int { spillLimit * db.pageSize / 2 }

    /// Applies the buffered changes, tree by tree, in key order (changes
    /// of one key in the order they were made: the last wins). Runs of
    /// deletes go in batches of neighbours, one descent per leaf. An error
    /// fails the transaction, as any change's does.
    override func applyBufferedChanges() throws {
        guard bufferedChanges != 0 else { return }
        let buffers = changeBuffers.values.sorted { $0.tree.root < $1.tree.root }
        changeBuffers.removeAll(keepingCapacity: true)
        bufferedChanges = 0
        bufferedBytes = 0
        // Emptied buffers are kept for the next ones, but not one that
        // grew past twice the limit (a large value held it): the
        // transaction would keep that memory to its end.
        defer {
            for buffer in buffers
            where spareChangeBuffers.count < Self.spareBuffers && buffer.capacity <= 2 * bufferLimitBytes {
                spareChangeBuffers.append(buffer)
            }
        }
        for buffer in buffers {
            let tree = buffer.tree
            // Sorted as (first 8 key bytes, offset) pairs, integers only;
            // the whole keys are compared only where the first 8 bytes tie.
            // Offsets grow in the order the changes were made.
            var order: [(prefix: UInt64, start: Int)] = []
            order.reserveCapacity(buffer.count)
            for start in buffer.starts { order.append((Self.prefix(buffer.key(at: start)), start)) }
            order.sort { a, b in
                if a.prefix != b.prefix { return a.prefix < b.prefix }
                let x = buffer.key(at: a.start)
                let y = buffer.key(at: b.start)
                let c = compareBytes(
                    x.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, x.count,
                    y.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, y.count)
                return c != 0 ? c < 0 : a.start < b.start
            }
            var doomed = KeyBatch()
            for (_, start) in order {
                let key = buffer.key(at: start)
                guard let value = buffer.value(at: start) else {
                    doomed.append(count: key.count) { $0.copyMemory(from: key) }
                    // A bounded batch: pages spill between batches.
                    if doomed.count == Self.deleteBatch { try deleteBuffered(&doomed, in: tree) }
                    continue
                }
                try deleteBuffered(&doomed, in: tree)
                try changing { try putNow(key, value, in: tree) }
            }
            try deleteBuffered(&doomed, in: tree)
        }
    }

    /// Emptied change buffers kept for reuse, at most.
    private static let spareBuffers = 2

    /// Deletes the buffered deletes `keys` (ascending, distinct, each
    /// present: ``delete(_:in:)`` looked each one up and counted it) and
    /// empties the batch.
    func deleteBuffered(_ keys: inout KeyBatch, in tree: Tree) throws {
        guard !keys.isEmpty else { return }
        let batch = keys
        keys = KeyBatch()
        try changing {
            let removed = try BTreeWriter(tx: self).deleteSortedRaw(batch, root: tree.root)
            guard removed == batch.count else {
                throw StorageError.corrupt(
                    page: tree.root, reason: "\(batch.count - removed) buffered deletes of \(tree.name) found no key")
            }
        }
    }

    /// Buffered deletes applied in one batch, at most.
    private static let deleteBatch = 256

    /// The first 8 bytes of `key`, big-endian, zero-padded: ordered as the
    /// keys are, except that keys equal in these bytes tie.
    @inline(__always) private static func prefix(_ key: UnsafeRawBufferPointer) -> UInt64 {
        if key.count >= 8 { return UInt64(bigEndian: key.loadUnaligned(as: UInt64.self)) }
        var word: UInt64 = 0
        for (i, byte) in key.enumerated() { word |= UInt64(byte) << (56 - 8 * i) }
        return word
    }

    /// Makes appends at `tree`'s right edge, for the rest of this
    /// transaction, leave a sixteenth of each leaf free, as InnoDB leaves
    /// room in its clustered index: a leaf filled by appends (keys in
    /// ascending order, such as row numbers) then takes values that grow
    /// by a few bytes when they are replaced, instead of splitting in
    /// two. For trees whose values get longer as they change; a tree
    /// whose entries never grow packs densely without it. Only the page
    /// layout depends on it, never what the tree holds.
    public func leaveRoomToGrow(in tree: Tree) throws {
        try checkOpen()
        try checkHandle(tree)
        if !growthRoots.contains(tree.root) { growthRoots.append(tree.root) }
    }

    /// Removes `key`; returns false when it was absent.
    ///
    /// Once the transaction has spilled, a delete looks the key up and is
    /// held in the change buffer with the puts (see ``put(_:_:in:)``), to
    /// be applied in key order: deletes of random keys from a tree larger
    /// than the budget then change each leaf once per buffer instead of
    /// reading it back, and writing it out again, once per delete.
    @discardableResult public func delete(_ key: [UInt8], in tree: Tree) throws -> Bool {
        if freshFloor != .max { return try bufferDelete(key, in: tree) }
        try checkOpen()
        try checkHandle(tree)
        return try changing {
            // Consecutive changes of one tree skip the bookkeeping lookups
            // but the count's, as puts do.
            let repeated = touchedLast(tree)
            if !repeated { try ensureCounted(tree) }
            guard try BTreeWriter(tx: self).deleteRaw(key, root: tree.root) else { return false }
            try Self.adjust(&counts[tree.root, default: 0], of: tree, by: -1)
            if !repeated {
                changedTrees[tree.root] = tree.name
                lastTouched = (tree.root, tree.name)
            }
            return true
        }
    }

    /// A delete once the transaction has spilled: whether `key` is present
    /// comes from the tree's pages and the buffered deletes (a tree whose
    /// buffer holds puts has them applied first), and a present key's
    /// delete is counted now and buffered.
    func bufferDelete(_ key: [UInt8], in tree: Tree) throws -> Bool {
        if ended { throw StorageError.transactionEnded }
        if let failure { throw StorageError.transactionFailed(failure) }
        try checkHandle(tree)
        guard key.count <= Database.maxKeyLength else { return false }
        return try key.withUnsafeBytes { try bufferDelete($0, in: tree) }
    }

    /// ``bufferDelete(_:in:)`` from bytes the caller holds (the key's
    /// length already checked).
    private func bufferDelete(_ key: UnsafeRawBufferPointer, in tree: Tree) throws -> Bool {
        let digest = Self.deleteDigest(key)
        var buffer = changeBuffers[tree.root]
        if let held = buffer {
            if held.puts > 0 {
                try applyBufferedChanges()
                buffer = nil  // applied, and emptied for reuse
            } else if held.holdsDelete(of: key, digest: digest) {
                return false
            }
        }
        return try changing {
            let present = try search(root: tree.root, key.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, key.count).2
            guard present else { return false }
            // Consecutive deletes of one tree skip the bookkeeping lookups
            // but the count's, as unbuffered ones do.
            let repeated = touchedLast(tree)
            if !repeated { try ensureCounted(tree) }
            try Self.adjust(&counts[tree.root, default: 0], of: tree, by: -1)
            if !repeated {
                changedTrees[tree.root] = tree.name
                lastTouched = (tree.root, tree.name)
            }
            try (buffer ?? changeBuffer(for: tree)).appendDelete(of: key, digest: digest)
            bufferedChanges += 1
            // The entry and its digest (counted as before the digest
            // replaced a set of keys, so the buffer is applied as often).
            bufferedBytes += 2 * key.count + 128
            if bufferedBytes >= bufferLimitBytes { try applyBufferedChanges() }
            return true
        }
    }

    /// Deletes every key of `keys` that `tree` holds and returns how many
    /// it held. Sorted keys (ascending, as `memcmp` orders them) are the
    /// fast case: neighbours in one leaf are removed together, with one
    /// descent and one rebalance. Any order is correct.
    @discardableResult public func delete(sortedKeys keys: [[UInt8]], in tree: Tree) throws -> Int {
        try delete(sortedKeys: KeyBatch(keys), in: tree)
    }

    /// Deletes every key of `keys` that `tree` holds and returns how many
    /// it held, as the form taking an array of keys does, with the keys in
    /// one buffer (no array per key).
    @discardableResult public func delete(sortedKeys keys: KeyBatch, in tree: Tree) throws -> Int {
        try checkOpen()
        try checkHandle(tree)
        return try changing {
            try ensureCounted(tree)
            let removed = try BTreeWriter(tx: self).deleteSortedRaw(keys, root: tree.root)
            guard removed > 0 else { return 0 }
            try Self.adjust(&counts[tree.root, default: 0], of: tree, by: -removed)
            changedTrees[tree.root] = tree.name
            return removed
        }
    }

    /// Puts every key of `keys` with the value `value(i)` of its index, as
    /// `put` would one by one. Ascending keys (as `memcmp` orders them) are
    /// the fast case: the keys that fall into one leaf go in with one
    /// descent, appended in place — an index built from sorted keys costs
    /// about one descent per leaf. Any order is correct (a key out of order,
    /// or one that replaces a value, splits a leaf or needs an overflow
    /// page, takes the general path). Once the transaction spilled, the puts
    /// are buffered as `put`'s are.
    public func put(sortedKeys keys: KeyBatch, values value: (Int) -> [UInt8], in tree: Tree) throws {
        try checkOpen()
        try checkHandle(tree)
        var index = 0
        while index < keys.count {
            if freshFloor != .max {
                try put(keys[index], value(index), in: tree)
                index += 1
                continue
            }
            index = try changing {
                try ensureCounted(tree)
                let (next, added) = try BTreeWriter(tx: self).putRun(keys, from: index, values: value, root: tree.root)
                if added > 0 {
                    try Self.adjust(&counts[tree.root, default: 0], of: tree, by: added)
                    changedTrees[tree.root] = tree.name
                }
                return next
            }
        }
    }

    /// Runs one change (the body of every public mutation): an error it
    /// throws marks the transaction failed, unless it is one found before
    /// anything changed (see the type's documentation).
    @inline(__always) func changing<R>(_ body: () throws -> R) throws -> R {
        do {
            let result = try body()
            // Between changes no page is in use: spill if over budget.
            if dirty.count > spillLimit { try spill() }
            return result
        } catch {
            noteFailure(error)
            throw error
        }
    }

    /// Marks the transaction failed after a change threw, unless the error
    /// is one found before anything changed.
    func noteFailure(_ error: any Error) {
        // The body of an update threw before anything changed.
        if error is BTreeWriter.UpdateFailure { return }
        if let error = error as? StorageError {
            switch error {
            case .keyTooLong, .valueTooLarge, .invalidTreeName, .noSuchTree, .staleTree, .transactionEnded,
                .transactionFailed:
                return
            default:
                break
            }
        }
        if failure == nil { failure = "\(error)" }
    }

    /// Adds `delta` to the tree's entry count. The count starts from the
    /// catalog, which is read from disk: a damaged entry can claim fewer
    /// entries than the tree holds, and deleting them all would take the
    /// count below zero, a number no catalog entry can hold. That is
    /// reported as the corruption it is, which fails the transaction,
    /// instead of trapping at commit. (Past `Int.max` is checked too, though
    /// `decodeCatalogValue` bounds counts far below it.)
    @inline(__always) private static func adjust(_ count: inout Int, of tree: Tree, by delta: Int) throws {
        let (adjusted, overflow) = count.addingReportingOverflow(delta)
        guard !overflow, adjusted >= 0 else {
            throw StorageError.corrupt(
                page: FileHeader.catalogRoot, reason: "catalog entry for \(tree.name) does not count the tree's entries")
        }
        count = adjusted
    }

    func ensureCounted(_ tree: Tree) throws {
        if counts[tree.root] == nil { _ = try super.count(tree) }
    }
}
