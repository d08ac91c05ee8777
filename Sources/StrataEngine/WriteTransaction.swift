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
    public private(set) var committedStamp: UInt64?
    /// The pages of this handle's commits appended before this
    /// transaction began and not yet published (their sync is pending),
    /// newest image by page number; read before the snapshot's.
    @exclusivity(unchecked) var pendingPages: [UInt32: Page] = [:]
    /// The fresh floor once the transaction first spilled (see
    /// `Database+Spill.swift`): pages at or past it that are not in
    /// ``dirty`` are in the main file, written there by this transaction.
    /// `UInt32.max` before any spill.
    @exclusivity(unchecked) var freshFloor = UInt32.max
    /// Private pages this transaction may hold before it spills.
    let spillLimit: Int
    /// Pages that existed before this transaction and that it spilled to
    /// the log as frames that are not a commit: the newest frame of each.
    @exclusivity(unchecked) private var spilledFrames: [UInt32: Int] = [:]
    /// The page number of each frame this transaction spilled, in order,
    /// from `spillStart` on; and the log's tail after them.
    private var spilledOrder: [UInt32] = []
    private var spillStart = 0
    private var spillTail: WAL.LogTail?
    /// Fresh pages written into the main file so far.
    private var freshSpilled = 0
    /// Puts and deletes held back once the transaction has spilled (see
    /// ``put(_:_:in:)`` and ``delete(_:in:)``), by tree root, in the order
    /// made; their count is `bufferedChanges`, and `bufferedBytes`
    /// estimates their memory (bounded by a quarter of the budget).
    @exclusivity(unchecked) private var changeBuffers: [UInt32: ChangeBuffer] = [:]
    @exclusivity(unchecked) private var bufferedBytes = 0

    /// One tree's held-back changes.
    private struct ChangeBuffer {
        let tree: Tree
        /// In the order made; a nil value is a delete.
        var entries: [(key: [UInt8], value: [UInt8]?)] = []
        /// How many of the entries are puts.
        var puts = 0
        /// The buffered deletes by a 64-bit digest of their key (see
        /// `deleteDigest`): the index in `entries` of the first delete with
        /// that digest. While the buffer holds no put, a key is in the tree
        /// as its pages show unless it is among the buffered deletes. A
        /// digest found here is confirmed against that entry's key; only a
        /// collision of two keys' digests costs a scan, never a wrong
        /// answer.
        var deletedDigests: [UInt64: Int] = [:]

        /// Buffers a delete of `key`, whose digest is `digest`.
        mutating func appendDelete(of key: [UInt8], digest: UInt64) {
            entries.append((key, nil))
            if deletedDigests[digest] == nil { deletedDigests[digest] = entries.count - 1 }
        }

        /// True when a delete of `key` is buffered.
        func holdsDelete(of key: [UInt8], digest: UInt64) -> Bool {
            guard let index = deletedDigests[digest] else { return false }
            if entries[index].key == key { return true }
            return entries.contains { $0.value == nil && $0.key == key }
        }
    }

    /// The digest of a key for ``ChangeBuffer/deletedDigests``: two
    /// CRC-32C of it with different seeds (hardware instructions; the
    /// array's own hashing took a quarter of a buffered delete).
    private static func deleteDigest(_ key: [UInt8]) -> UInt64 {
        key.withUnsafeBytes { k in
            let p = k.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
            return UInt64(crc32c(0, p, k.count)) << 32 | UInt64(crc32c(0x9E37_79B9, p, k.count))
        }
    }

    /// Pages this transaction holds in memory (for tests of its bound).
    package var heldPageCount: Int { dirty.count }
    /// Trees whose entry count changed: root → name.
    @exclusivity(unchecked) var changedTrees: [UInt32: String] = [:]
    @exclusivity(unchecked) var modifications = 0
    /// Scratch space for building one cell.
    let cellBuffer: UnsafeMutableRawPointer
    /// The descent path's buffer, reused by each put.
    @exclusivity(unchecked) var pathScratch: [(UInt32, Int)] = []
    /// The tree the last put or delete changed, whose entries in
    /// ``counts`` and ``changedTrees`` are known to exist.
    @exclusivity(unchecked) private var lastTouched: (root: UInt32, name: String)?

    /// The instance number the next tree created or renamed gets (see
    /// ``Tree``).
    private var nextTreeInstance: UInt32 = 1

    init(db: Database, snapshot: Database.Snapshot, serial: UInt64, freelist: Freelist) {
        header = snapshot.header
        self.freelist = freelist
        self.freelist.changed = false
        cellBuffer = .allocate(byteCount: db.pageSize, alignment: 16)
        spillLimit = db.spillLimitPages
        catalogBase = snapshot.position
        super.init(db: db, snapshot: snapshot, serial: serial, fingers: true)
    }

    /// Records that the tree at `root` is now the new tree `name` (created
    /// or renamed) and returns its handle.
    private func newInstance(_ name: String, root: UInt32) -> Tree {
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

    override func page(_ number: UInt32) throws -> Page {
        if let page = dirty[number] { return page }
        if let page = try spilledImage(number) { return page }
        return try committedPage(number)
    }

    /// Page `number` read back from where this transaction spilled it (a
    /// new copy, its own), or nil when it did not spill it.
    @inline(__always) private func spilledImage(_ number: UInt32) throws -> Page? {
        if number >= freshFloor { return try db.readSpilledPage(number) }
        if !spilledFrames.isEmpty, let frame = spilledFrames[number] { return try db.readSpilledFrame(frame, page: number) }
        return nil
    }

    /// Page `number` as the commits before this transaction left it: a
    /// pending commit's image (see ``PendingCommits``), else the snapshot's.
    @inline(__always) private func committedPage(_ number: UInt32) throws -> Page {
        if !pendingPages.isEmpty, let page = pendingPages[number] { return page }
        return try db.pager.page(number, at: snapshot.position, pageCount: header.pageCount)
    }

    // MARK: Pages

    /// A private copy of page `number` that this transaction may change.
    func writable(_ number: UInt32) throws -> Page {
        if let page = dirty[number] { return page }
        // A spilled page read back is this transaction's own copy already.
        let copy = try spilledImage(number) ?? Page.copy(of: try committedPage(number))
        dirty[number] = copy
        return copy
    }

    /// A new zeroed page: the lowest free page, or one past the end.
    func allocate() throws -> (UInt32, Page) {
        let number: UInt32
        if let free = freelist.allocate() {
            number = free
        } else {
            guard header.pageCount < UInt32.max - 1 else {
                throw StorageError.diskFull(path: db.path + " (the store reached 2^32 pages)")
            }
            number = header.pageCount
            header.pageCount += 1
        }
        let page = Page.zeroed(db.pageSize)
        dirty[number] = page
        shape &+= 1
        return (number, page)
    }

    /// Returns a page to the freelist. Its content no longer matters, so it
    /// is not written at commit.
    func free(_ number: UInt32) {
        shape &+= 1
        dirty.remove(number)
        freelist.free(number)
    }

    // MARK: Trees

    /// Creates the tree called `name`, or returns it when it exists.
    @discardableResult public func createTree(_ name: String) throws -> Tree {
        try checkOpen()
        return try changing {
            if let existing = try treeIfPresent(name) { return existing }
            let key = Array(name.utf8)
            guard !key.isEmpty, key.count <= 255 else {
                throw StorageError.invalidTreeName("tree names are 1 to 255 UTF-8 bytes: \(name.debugDescription)")
            }
            let (root, page) = try allocate()
            catalogBase = nil
            Node.format(page, leaf: true)
            counts[root] = 0
            changedTrees[root] = name
            try BTreeWriter(tx: self).putRaw(key, catalogValue(root: root, count: 0), root: FileHeader.catalogRoot)
            return newInstance(name, root: root)
        }
    }

    /// Deletes the tree called `name` and frees all its pages. Returns false
    /// when there was no such tree. Its handles are stale from then on (see
    /// ``Tree``), even if a tree of that name is created again.
    @discardableResult public func dropTree(_ name: String) throws -> Bool {
        try checkOpen()
        return try changing {
            guard let tree = try treeIfPresent(name) else { return false }
            catalogBase = nil
            // The handles go first: from here on the tree is half freed.
            treeInstances[tree.root] = (nil, 0)
            treeEpoch &+= 1
            modifications += 1
            try freeSubtree(tree.root)
            counts.removeValue(forKey: tree.root)
            changedTrees.removeValue(forKey: tree.root)
            lastTouched = nil
            _ = try BTreeWriter(tx: self).deleteRaw(Array(name.utf8), root: FileHeader.catalogRoot)
            return true
        }
    }

    /// Renames tree `from` to `to`, which must not exist; its entries and
    /// root stay. Handles of the old name are stale afterwards (see
    /// ``Tree``). For the package's own use (a migration builds a table's
    /// new records in a fresh tree, in key order, then renames it).
    @discardableResult package func renameTree(_ from: String, to: String) throws -> Tree {
        try checkOpen()
        return try changing {
            guard let tree = try treeIfPresent(from) else { throw StorageError.noSuchTree(from) }
            let key = Array(to.utf8)
            guard !key.isEmpty, key.count <= 255 else {
                throw StorageError.invalidTreeName("tree names are 1 to 255 UTF-8 bytes: \(to.debugDescription)")
            }
            guard try treeIfPresent(to) == nil else { throw StorageError.invalidTreeName("a tree named \(to) exists") }
            let value = catalogValue(root: tree.root, count: try count(tree))
            catalogBase = nil
            treeEpoch &+= 1
            modifications += 1
            _ = try BTreeWriter(tx: self).deleteRaw(Array(from.utf8), root: FileHeader.catalogRoot)
            try BTreeWriter(tx: self).putRaw(key, value, root: FileHeader.catalogRoot)
            changedTrees[tree.root] = to
            lastTouched = nil
            return newInstance(to, root: tree.root)
        }
    }

    /// Removes every entry of `tree`, keeping the tree.
    public func clear(_ tree: Tree) throws {
        try checkOpen()
        try checkHandle(tree)
        try changing {
            let root = try treeNode(tree.root)
            if !root.isLeaf {
                for i in 0...root.count { try freeSubtree(root.child(i)) }
            } else {
                for i in 0..<root.count {
                    if case .overflow(let first, _) = root.leafValue(i) { try BTreeWriter(tx: self).freeOverflow(first) }
                }
            }
            Node.format(try writable(tree.root), leaf: true)
            counts[tree.root] = 0
            changedTrees[tree.root] = tree.name
            modifications += 1
        }
    }

    private func freeSubtree(_ number: UInt32) throws {
        var stack: [(UInt32, Int)] = [(number, 0)]
        while let (page, depth) = stack.popLast() {
            guard depth <= Cursor.maxDepth else { throw StorageError.corrupt(page: page, reason: "tree too deep: a cycle") }
            let node = try treeNode(page)
            if node.isLeaf {
                for i in 0..<node.count {
                    if case .overflow(let first, _) = node.leafValue(i) { try BTreeWriter(tx: self).freeOverflow(first) }
                }
            } else {
                for i in 0...node.count { stack.append((node.child(i), depth + 1)) }
            }
            free(page)
        }
    }

    func catalogValue(root: UInt32, count: Int) -> [UInt8] {
        var v = [UInt8](repeating: 0, count: 12)
        v.withUnsafeMutableBytes {
            storeBE32($0.baseAddress!, root)
            storeBE64($0.baseAddress! + 4, UInt64(count))
        }
        return v
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
            changeBuffers[tree.root, default: ChangeBuffer(tree: tree)].entries.append((key, value))
            changeBuffers[tree.root]?.puts += 1
            bufferedChanges += 1
            bufferedBytes += key.count + value.count + 96
            if bufferedBytes >= bufferLimitBytes { try applyBufferedChanges() }
            return
        }
        try changing { try putNow(key, value, in: tree) }
    }

    /// A put's change proper.
    @inline(__always) private func putNow(_ key: [UInt8], _ value: [UInt8], in tree: Tree) throws {
        // Consecutive puts into one tree skip the bookkeeping lookups but
        // the count's increment.
        if let last = lastTouched, last.root == tree.root, last.name == tree.name {
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

    /// The memory the change buffer may take before it is applied: a
    /// quarter of the budget.
    private var bufferLimitBytes: Int { spillLimit * db.pageSize / 4 }

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
        for buffer in buffers {
            let entries = buffer.entries
            let tree = buffer.tree
            // Sorted as (first 8 key bytes, position) pairs, integers only;
            // the whole keys are compared only where the first 8 bytes tie.
            var order: [(prefix: UInt64, index: Int)] = []
            order.reserveCapacity(entries.count)
            for (i, entry) in entries.enumerated() { order.append((Self.prefix(entry.key), i)) }
            order.sort { a, b in
                if a.prefix != b.prefix { return a.prefix < b.prefix }
                let c = Self.compare(entries[a.index].key, entries[b.index].key)
                return c != 0 ? c < 0 : a.index < b.index
            }
            var doomed = KeyBatch()
            for (_, i) in order {
                guard let value = entries[i].value else {
                    doomed.append(entries[i].key)
                    // A bounded batch: pages spill between batches.
                    if doomed.count == Self.deleteBatch { try deleteBuffered(&doomed, in: tree) }
                    continue
                }
                try deleteBuffered(&doomed, in: tree)
                try changing { try putNow(entries[i].key, value, in: tree) }
            }
            try deleteBuffered(&doomed, in: tree)
        }
    }

    /// Deletes the buffered deletes `keys` (ascending, distinct, each
    /// present: ``delete(_:in:)`` looked each one up and counted it) and
    /// empties the batch.
    private func deleteBuffered(_ keys: inout KeyBatch, in tree: Tree) throws {
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
    @inline(__always) private static func prefix(_ key: [UInt8]) -> UInt64 {
        key.withUnsafeBytes { raw in
            if raw.count >= 8 { return UInt64(bigEndian: raw.loadUnaligned(as: UInt64.self)) }
            var word: UInt64 = 0
            for (i, byte) in raw.enumerated() { word |= UInt64(byte) << (56 - 8 * i) }
            return word
        }
    }

    /// `memcmp` order of two keys.
    @inline(__always) private static func compare(_ a: [UInt8], _ b: [UInt8]) -> Int {
        a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in
                compareBytes(
                    pa.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, pa.count,
                    pb.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, pb.count)
            }
        }
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
            try ensureCounted(tree)
            guard try BTreeWriter(tx: self).deleteRaw(key, root: tree.root) else { return false }
            try Self.adjust(&counts[tree.root, default: 0], of: tree, by: -1)
            changedTrees[tree.root] = tree.name
            return true
        }
    }

    /// A delete once the transaction has spilled: whether `key` is present
    /// comes from the tree's pages and the buffered deletes (a tree whose
    /// buffer holds puts has them applied first), and a present key's
    /// delete is counted now and buffered.
    private func bufferDelete(_ key: [UInt8], in tree: Tree) throws -> Bool {
        if ended { throw StorageError.transactionEnded }
        if let failure { throw StorageError.transactionFailed(failure) }
        try checkHandle(tree)
        guard key.count <= Database.maxKeyLength else { return false }
        let digest = Self.deleteDigest(key)
        if let buffer = changeBuffers[tree.root] {
            if buffer.puts > 0 {
                try applyBufferedChanges()
            } else if buffer.holdsDelete(of: key, digest: digest) {
                return false
            }
        }
        return try changing {
            let present = try key.withUnsafeBytes { k in
                try search(root: tree.root, k.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, k.count).2
            }
            guard present else { return false }
            try ensureCounted(tree)
            try Self.adjust(&counts[tree.root, default: 0], of: tree, by: -1)
            changedTrees[tree.root] = tree.name
            changeBuffers[tree.root, default: ChangeBuffer(tree: tree)].appendDelete(of: key, digest: digest)
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
    @inline(__always) private func changing<R>(_ body: () throws -> R) throws -> R {
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
    private func noteFailure(_ error: any Error) {
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

    private func ensureCounted(_ tree: Tree) throws {
        if counts[tree.root] == nil { _ = try super.count(tree) }
    }

    // MARK: Spilling

    /// Writes pages out of memory until an eighth of the budget is free,
    /// branch pages kept (every descent reads them): first fresh pages into
    /// the main file (see `Database+Spill.swift`), then, when those are not
    /// enough, pages that existed before the transaction into the log, as
    /// frames that are not a commit (see ``spillToLog(_:)``). Runs between
    /// changes only, never inside one: a change holds references to the
    /// pages it edits.
    private func spill() throws {
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
    private func spillFresh(_ excess: Int) throws {
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
    private func spillToLog(_ victims: [(number: UInt32, page: Page)]) throws {
        var tail = spillTail
        if tail == nil {
            tail = db.pendingCommits.tail
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

    // MARK: Commit

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
        // the writer lock belongs to the group (see `PendingCommits`).
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
        try writeCatalogAndFreelist()
        let sealed = try sealPages()
        let appended = try appendToLog(sealed)
        guard db.options.durability == .full else {
            publishAndCheckpoint(appended)
            return
        }
        let ticket = try queueForSharedSync(appended)
        handedOver = true
        try awaitSharedSync(ticket)
        committedStamp = db.stamp(generation: appended.generation, frames: appended.tail.frames)
        if appended.checkpointDue { db.checkpointAfterCommit(recent: appended.recent, whatever: sealed.wroteMain) }
    }

    /// The commit's first step: changes still buffered are applied; one
    /// that fails becomes the transaction's failure, thrown by the commit.
    private func applyBufferedChangesForCommit() {
        guard failure == nil && bufferedChanges != 0 else { return }
        do { try applyBufferedChanges() } catch { if failure == nil { failure = "\(error)" } }
    }

    /// Records each changed tree's root and count in the catalog, and the
    /// free pages in the freelist trunks.
    private func writeCatalogAndFreelist() throws {
        for (root, name) in changedTrees.sorted(by: { $0.key < $1.key }) {
            try BTreeWriter(tx: self).putRaw(
                Array(name.utf8), catalogValue(root: root, count: counts[root] ?? 0), root: FileHeader.catalogRoot)
        }
        try persistFreelist()
    }

    /// The pages a commit logs, sealed, in page order.
    private struct SealedPages {
        var pages: [(number: UInt32, page: Page)]
        /// True when the transaction spilled: its fresh pages went to the
        /// main file (written and synced by ``sealPages()``).
        let wroteMain: Bool
    }

    /// Writes the header into page 0 when it changed, seals every dirty
    /// page's checksum, and writes and syncs the fresh pages of a
    /// transaction that spilled to the main file before any log frame
    /// can reach them.
    private func sealPages() throws -> SealedPages {
        let wroteMain = freshSpilled > 0
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
        }
        return SealedPages(pages: pages, wroteMain: wroteMain)
    }

    /// A commit appended to the log, not yet durable or published.
    private struct AppendedCommit {
        let sealed: SealedPages
        let tail: WAL.LogTail
        /// The first frame readers take this commit's pages from (its
        /// spilled frames' first when it spilled).
        let first: Int
        let generation: UInt32
        let recent: WAL.RecentCommit
        let checkpointDue: Bool
    }

    /// Appends the sealed pages to the log as one commit, after the
    /// pending commits of this handle and this transaction's spilled
    /// frames (the log restarts first when nothing is pending), and
    /// remembers the freelist and catalog it leaves.
    private func appendToLog(_ sealed: SealedPages) throws -> AppendedCommit {
        let pages = sealed.pages
        let pendingTail = spillTail ?? db.pendingCommits.tail
        if pendingTail == nil { try db.restartLogIfPossible() }
        let tail = try db.wal.appendCommit(pages, pageCount: header.pageCount, after: pendingTail)
        let pagesFirst = tail.frames - pages.count
        let first = spillTail == nil ? pagesFirst : spillStart
        let generation = db.stateLock.withLock { db.wal.state.generation }
        let position = SharedIndex.State.position(generation: generation, frames: tail.frames)
        db.rememberFreelist(freelist, position: position)
        if let catalogBase {
            db.advanceCatalogCache(from: catalogBase, to: position, changed: changedTrees, counts: counts)
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
            checkpointDue: checkpointDue)
    }

    /// Durability below `full`: nothing to wait for, so the commit is
    /// published now, under the gate, and checkpoints when due.
    private func publishAndCheckpoint(_ commit: AppendedCommit) {
        db.publish(
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
    private func queueForSharedSync(_ commit: AppendedCommit) throws -> UInt64 {
        try db.pendingCommits.enqueue(
            PendingCommits.Entry(
                ticket: 0, pages: commit.sealed.pages, first: commit.first, tail: commit.tail, header: header,
                freelist: freelist, mainChanged: commit.sealed.wroteMain, spilled: spilledOrder))
    }

    /// Group commit, once the commit is queued (`ticket`): the transaction
    /// is over, the next writer comes in, and this thread waits for a sync
    /// that covers the commit (its own or another's), which publishes it.
    private func awaitSharedSync(_ ticket: UInt64) throws {
        ended = true
        dirty.removeAll()
        if spillTail == nil {
            db.gate.release()
            try db.awaitDurable(ticket)
        } else {
            // Published before the next writer of this handle begins: its
            // continuation reads pending commits' pages from memory, and
            // this commit's spilled ones are only in the log.
            defer { db.gate.release() }
            try db.awaitDurable(ticket)
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
    private func persistFreelist() throws {
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
