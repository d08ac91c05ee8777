/// A named tree of a store, as seen by one transaction. Get one with
/// ``ReadTransaction/tree(_:)`` or ``WriteTransaction/createTree(_:)``.
///
/// A handle is tied to the tree it was resolved for, in the transaction that
/// returned it: used in another transaction, or after its tree was dropped
/// or renamed (even if a tree of the same name was created again, perhaps
/// on the same root page), it throws ``StorageError/staleTree(name:reason:)``
/// instead of reading or writing pages that are no longer that tree's.
public struct Tree: Hashable, Sendable, CustomStringConvertible {
    /// The tree's name in the catalog.
    public let name: String
    /// The root page. Roots never move, so the number is stable for the
    /// tree's whole life.
    let root: UInt32
    /// The serial number of the transaction that returned the handle.
    let owner: UInt64
    /// Which tree of that root: 0 for the tree the transaction's snapshot
    /// holds there, else the number the writer gave the tree when it
    /// created or renamed it.
    let instance: UInt32
    /// The writer's count of drops and renames when the handle was made:
    /// while the count is unchanged the tree cannot have gone, and a use
    /// checks no more than that. Not part of the handle's identity.
    let epoch: UInt32

    /// The handle as `Tree(<name>)`.
    public var description: String { "Tree(\(name))" }

    /// Two handles are equal when they name the same tree, resolved in the same
    /// transaction.
    public static func == (a: Tree, b: Tree) -> Bool {
        a.root == b.root && a.owner == b.owner && a.instance == b.instance && a.name == b.name
    }

    /// Hashes what `==` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(root)
        hasher.combine(owner)
        hasher.combine(instance)
    }
}

/// A read-only view of one snapshot: every read sees the store exactly as
/// it was at the commit before the transaction began, whatever writers do
/// meanwhile.
///
/// End it with ``end()`` (or let ``Database/read(_:)`` do it) so that
/// checkpoints can move past its snapshot. A transaction is not meant to be
/// shared between threads.
public class ReadTransaction {
    let db: Database
    @exclusivity(unchecked) var snapshot: Database.Snapshot
    @exclusivity(unchecked) var ended = false
    /// Entry counts as stored in the catalog, by root page.
    @exclusivity(unchecked) var counts: [UInt32: Int] = [:]
    /// A reader's first tree's count, kept here instead of in ``counts``
    /// (see ``rememberCount(_:_:)``); root 0 (the file header's page,
    /// never a tree's) while there is none. Always 0 in the writer.
    @exclusivity(unchecked) final var firstCountRoot: UInt32 = 0
    @exclusivity(unchecked) final var firstCount = 0
    /// This transaction's serial number: the owner of the ``Tree``s it
    /// returns. Unique among the handle's transactions (and, counting from
    /// a random start, practically among all handles').
    let serial: UInt64
    /// The writer's count of tree drops and renames (see ``Tree``); always
    /// 0 in a reader, whose trees never change.
    @exclusivity(unchecked) var treeEpoch: UInt32 = 0
    /// The writer's trees created, dropped or renamed in this transaction,
    /// by root: the live tree's name and instance, or a nil name when the
    /// root's tree was dropped. Roots not listed hold the snapshot's tree
    /// (instance 0), if any. Always empty in a reader.
    @exclusivity(unchecked) var treeInstances: [UInt32: (name: String?, instance: UInt32)] = [:]
    /// The writer's last few trees ``treeIfPresent(_:)`` found, each valid
    /// while ``treeEpoch`` is the one it was made at: a save asks for the
    /// same few trees again and again, and each lookup in the shared
    /// catalog cache hashed the name under its lock (about 850
    /// instructions). Readers, which mostly ask once, keep none (the
    /// array's allocation would cost them more).
    @exclusivity(unchecked) var recentTrees: [Tree] = []

    /// The writer's ``Finger``s, one per tree for the last ``maxFingers``
    /// trees it descended into (nil in a reader), the next to replace at
    /// `nextFingerSlot`.
    let fingers: UnsafeMutablePointer<Finger>?
    final var nextFingerSlot = 0
    /// Advanced by the writer whenever a tree changes shape: a page
    /// allocated or freed, cells moved between siblings (see ``Finger``).
    final var shape: UInt64 = 0

    /// Pages this snapshot has fetched, direct-mapped by page number. A page
    /// number's image never changes within a snapshot, so the upper levels
    /// of a tree are found again without the shared cache's lock and hash.
    private let memoPages: UnsafeMutablePointer<Page?>
    private let memoNumbers: UnsafeMutablePointer<UInt32>
    /// The memo's slots that hold a page, a bit each (``memoSize`` is 64):
    /// the deinit visits these alone, where a pass over every slot cost a
    /// point fetch about 190 instructions.
    @exclusivity(unchecked) private var memoUsed: UInt64 = 0
    private static let memoSize = 64

    /// The main file's mapping, for a transaction whose whole snapshot is
    /// in the main file (see ``Database/beginRead()`` and
    /// ``Database/beginWrite()``): its verified tree pages are read
    /// straight from the mapping (in the writer, those it holds no image of
    /// its own: see ``WriteTransaction/holdsOwnImage(_:)``). Nil otherwise.
    /// Holding it keeps the mapping alive for nodes that point into it.
    let direct: MappedMainFile?
    /// `direct`'s address, page size and marks (kept valid by `direct`).
    let directView: MappedMainFile.View?
    /// Pages below this number may be read through `direct`: the page count
    /// of the snapshot the main file holds (for a writer continuing from
    /// pending commits, the published one, not theirs).
    final let directPages: UInt32

    /// True when this transaction reads verified tree pages straight from
    /// the main file's mapping (for tests and tools).
    package var readsMainFileDirectly: Bool { direct != nil }

    init(
        db: Database, snapshot: Database.Snapshot, serial: UInt64, direct: MappedMainFile? = nil,
        directPages: UInt32? = nil, writes: Bool = false
    ) {
        self.db = db
        self.snapshot = snapshot
        self.serial = serial
        self.direct = direct
        directView = direct?.view
        self.directPages = directPages ?? snapshot.header.pageCount
        memoPages = .allocate(capacity: Self.memoSize)
        memoPages.initialize(repeating: nil, count: Self.memoSize)
        memoNumbers = .allocate(capacity: Self.memoSize)
        memoNumbers.initialize(repeating: UInt32.max, count: Self.memoSize)
        if writes {
            // A save writes a handful of trees: their counts fit without
            // the table growing three times.
            counts.reserveCapacity(8)
            let slots = UnsafeMutablePointer<Finger>.allocate(capacity: Self.maxFingers)
            slots.initialize(repeating: Finger(), count: Self.maxFingers)
            self.fingers = slots
        } else {
            self.fingers = nil
        }
    }

    static let maxFingers = 4

    deinit {
        end()
        // Only the slots that hold a page: `deinitialize(count:)` over
        // all of them went through the runtime's generic array destroy,
        // about 3,200 instructions a transaction (callgrind, lone saves).
        // A nil slot needs no deinitializing.
        var used = memoUsed
        while used != 0 {
            (memoPages + used.trailingZeroBitCount).deinitialize(count: 1)
            used &= used &- 1
        }
        memoPages.deallocate()
        memoNumbers.deallocate()
        fingers?.deinitialize(count: Self.maxFingers)
        fingers?.deallocate()
    }

    /// Releases the snapshot. Further reads throw
    /// ``StorageError/transactionEnded``.
    public func end() {
        guard !ended else { return }
        ended = true
        if !(self is WriteTransaction) { db.endRead(snapshot.position) }
    }

    /// The page image this transaction sees.
    func page(_ number: UInt32) throws -> Page {
        if db.closedForReads.load(ordering: .relaxed) { throw StorageError.closed }
        if let page = memoized(number) { return page }
        let page = try db.pager.page(number, at: snapshot.position, pageCount: snapshot.header.pageCount)
        memoize(page, number)
        return page
    }

    /// The image of page `number` this snapshot fetched last, if the memo
    /// still holds it.
    @inline(__always) final func memoized(_ number: UInt32) -> Page? {
        let slot = Int(number) & (Self.memoSize - 1)
        return memoNumbers[slot] == number ? memoPages[slot] : nil
    }

    /// Remembers `page` as the image of page `number` in this snapshot.
    @inline(__always) final func memoize(_ page: Page, _ number: UInt32) {
        let slot = Int(number) & (Self.memoSize - 1)
        memoNumbers[slot] = number
        memoPages[slot] = page
        memoUsed |= 1 &<< UInt64(slot)
    }

    /// Set in the writer by the first change that failed part-way (see
    /// ``WriteTransaction``); always nil in a reader.
    var failure: String?

    /// Puts and deletes the writer holds back, not yet in its trees (see
    /// ``WriteTransaction``'s change buffer); always 0 in a reader.
    var bufferedChanges = 0

    /// Applies the writer's buffered changes; a reader has none.
    func applyBufferedChanges() throws {}

    /// Throws unless the transaction can be used; in a writer holding
    /// buffered changes, applies them first, so every read and every other
    /// change (each begins here) sees them.
    @inline(__always) func checkOpen() throws {
        if ended { throw StorageError.transactionEnded }
        if let failure { throw StorageError.transactionFailed(failure) }
        if bufferedChanges != 0 { try applyBufferedChanges() }
    }

    /// Throws ``StorageError/staleTree(name:reason:)`` unless `tree` is a
    /// handle this transaction returned whose tree has been neither dropped
    /// nor renamed since.
    @inline(__always) func checkHandle(_ tree: Tree) throws {
        guard tree.owner == serial, tree.epoch == treeEpoch || isLive(tree) else { throw staleHandle(tree) }
    }

    /// True when the tree `tree` was made for is still the tree at its root.
    private func isLive(_ tree: Tree) -> Bool {
        guard let live = treeInstances[tree.root] else { return tree.instance == 0 }
        return live.name == tree.name && live.instance == tree.instance
    }

    private func staleHandle(_ tree: Tree) -> StorageError {
        StorageError.staleTree(
            name: tree.name,
            reason: tree.owner != serial
                ? "it was returned by another transaction (a Tree is valid only in the transaction that returned it)"
                : "the tree was dropped or renamed since the handle was returned (look it up again)")
    }

    /// The handle of the tree `name` whose root is `root`.
    func handle(_ name: String, root: UInt32) -> Tree {
        let instance = treeInstances.isEmpty ? 0 : treeInstances[root]?.instance ?? 0
        return Tree(name: name, root: root, owner: serial, instance: instance, epoch: treeEpoch)
    }

    /// Pages this transaction can see: the snapshot's, or for the writer its
    /// own page count, pages it allocated included.
    var visiblePageCount: UInt32 { snapshot.header.pageCount }

    /// Incremented by every change; cursors use it to notice that they must
    /// re-seek.
    var modificationCount: Int { 0 }

    // MARK: Trees

    /// The tree called `name`; throws ``StorageError/noSuchTree(_:)``.
    public func tree(_ name: String) throws -> Tree {
        guard let tree = try treeIfPresent(name) else { throw StorageError.noSuchTree(name) }
        return tree
    }

    /// The tree called `name`, or nil.
    public func treeIfPresent(_ name: String) throws -> Tree? {
        try checkOpen()
        // Bytes, as the catalog compares names: `==` takes two spellings of
        // one Unicode name as equal.
        if fingers != nil,
            let i = recentTrees.firstIndex(where: {
                $0.epoch == treeEpoch && $0.name.hasSameBytes(as: name)
            })
        {
            return recentTrees[i]
        }
        let position = catalogPosition
        if let position, let (root, count) = db.catalog.entry(name, position: position) {
            // Root 0 (the file header, never a tree's): no such tree.
            if root == 0 { return nil }
            rememberCount(root, count)
            return remember(handle(name, root: root))
        }
        let key = Array(name.utf8)
        guard key.count <= Database.maxKeyLength else { return nil }
        guard let value = try value(for: key, root: FileHeader.catalogRoot) else {
            if let position { db.catalog.remember(name, position: position, root: 0, count: 0) }
            return nil
        }
        let (root, count) = try decodeCatalogValue(value, name: name)
        rememberCount(root, count)
        if let position { db.catalog.remember(name, position: position, root: root, count: count) }
        return remember(handle(name, root: root))
    }

    /// Records `count` as the catalog's count of the tree at `root`, unless
    /// one is recorded already. A reader keeps its first tree's count
    /// beside ``counts``: a point fetch looks one tree up, and the
    /// dictionary's first entry allocated its storage (about 680
    /// instructions, and as much again to free it with the transaction).
    /// The writer, whose counts change, keeps them all in ``counts``.
    @inline(__always) final func rememberCount(_ root: UInt32, _ count: Int) {
        if fingers == nil && (firstCountRoot == 0 || firstCountRoot == root) {
            if firstCountRoot == 0 {
                firstCountRoot = root
                firstCount = count
            }
            return
        }
        if counts[root] == nil { counts[root] = count }
    }

    /// The count ``rememberCount(_:_:)`` recorded for the tree at `root`.
    @inline(__always) final func rememberedCount(_ root: UInt32) -> Int? {
        if root == firstCountRoot && root != 0 { return firstCount }
        return counts[root]
    }

    /// Keeps `tree` among ``recentTrees`` (the eight last found; a drop or
    /// a rename changes the epoch, which retires them all, and a creation
    /// needs nothing, as names not found are not kept) and returns it.
    private func remember(_ tree: Tree) -> Tree {
        guard fingers != nil else { return tree }
        if recentTrees.isEmpty { recentTrees.reserveCapacity(8) }
        if recentTrees.count == 8 { recentTrees.removeFirst() }
        recentTrees.append(tree)
        return tree
    }

    /// The position whose catalog this transaction's catalog is, for the
    /// shared catalog cache (``CatalogCache/entry(_:position:)``);
    /// nil once a write transaction created, dropped or renamed a tree.
    var catalogPosition: UInt64? { snapshot.position }

    /// A tree's root page and entry count from its catalog entry.
    ///
    /// The count is bounded by what the file can hold: every entry takes
    /// at least 4 bytes of a leaf (its slot and two length bytes), and the
    /// trees' leaves are distinct pages. A damaged count past that bound is
    /// corruption; within it, counts stay far from `Int.max`, so sums of
    /// them (a store's total, a count plus unsaved inserts) cannot overflow.
    func decodeCatalogValue(_ value: [UInt8], name: String) throws -> (UInt32, Int) {
        guard value.count == 12 else {
            throw StorageError.corrupt(page: FileHeader.catalogRoot, reason: "catalog entry for \(name) has \(value.count) bytes")
        }
        let root = value.withUnsafeBytes { loadBE32($0.baseAddress!) }
        let count = value.withUnsafeBytes { loadBE64($0.baseAddress! + 4) }
        guard root >= 2, root < visiblePageCount, count <= UInt64(visiblePageCount) * UInt64(db.pageSize) / 4 else {
            throw StorageError.corrupt(page: FileHeader.catalogRoot, reason: "catalog entry for \(name) is out of range")
        }
        return (root, Int(count))
    }

    /// Names of all trees, in byte order.
    public func treeNames() throws -> [String] {
        try checkOpen()
        var names: [String] = []
        let cursor = Cursor(tx: self, root: FileHeader.catalogRoot)
        var more = try cursor.first()
        while more {
            names.append(String(decoding: try cursor.key(), as: UTF8.self))
            more = try cursor.next()
        }
        return names
    }

    /// Number of entries in `tree`, kept in the catalog (no scan).
    public func count(_ tree: Tree) throws -> Int {
        try checkOpen()
        try checkHandle(tree)
        if let n = rememberedCount(tree.root) { return n }
        _ = try self.tree(tree.name)
        return rememberedCount(tree.root) ?? 0
    }

    // MARK: Reads

    /// The value stored under `key`, or nil.
    public func get(_ key: [UInt8], in tree: Tree) throws -> [UInt8]? {
        try checkOpen()
        try checkHandle(tree)
        return try value(for: key, root: tree.root)
    }

    /// ``get(_:in:)`` into `buffer`'s storage: `buffer` holds the value
    /// (its old contents gone) and the call returns true, or it is emptied
    /// and the call returns false when the key is absent. A caller that
    /// reads many values reuses one allocation this way.
    public func get(_ key: [UInt8], in tree: Tree, into buffer: inout [UInt8]) throws -> Bool {
        try checkOpen()
        try checkHandle(tree)
        buffer.removeAll(keepingCapacity: true)
        return try key.withUnsafeBytes { k in
            let (leaf, index, found) = try search(root: tree.root, k.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, k.count)
            guard found else { return false }
            switch leaf.leafValue(index) {
            case .inline(let p, let n):
                withExtendedLifetime(leaf.owner) { buffer.append(contentsOf: UnsafeRawBufferPointer(start: p, count: n)) }
            case .overflow(let first, let length):
                buffer = try readOverflow(first: first, length: length)
            }
            return true
        }
    }

    /// Calls `body` with the value stored under `key` without copying it
    /// when it is stored inline; returns nil when the key is absent. The
    /// buffer is valid only during the call.
    public func withValue<R>(for key: [UInt8], in tree: Tree, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        try checkOpen()
        try checkHandle(tree)
        return try key.withUnsafeBytes { k -> R? in
            let (leaf, index, found) = try search(root: tree.root, k.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, k.count)
            guard found else { return nil }
            switch leaf.leafValue(index) {
            case .inline(let p, let n):
                return try withExtendedLifetime(leaf.owner) { try body(UnsafeRawBufferPointer(start: p, count: n)) }
            case .overflow(let first, let length):
                let bytes = try readOverflow(first: first, length: length)
                return try bytes.withUnsafeBytes { try body($0) }
            }
        }
    }

    /// True when `key` is present in `tree`.
    public func contains(_ key: [UInt8], in tree: Tree) throws -> Bool {
        try checkOpen()
        try checkHandle(tree)
        return try key.withUnsafeBytes { k in
            try search(root: tree.root, k.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, k.count).2
        }
    }

    /// A cursor over `tree`, not yet positioned.
    public func cursor(_ tree: Tree) throws -> Cursor {
        try checkOpen()
        try checkHandle(tree)
        return Cursor(tx: self, tree: tree)
    }

    /// Entries with `lower <= key < upper` (either bound may be nil), in
    /// ascending or descending key order.
    public func scan(
        _ tree: Tree, from lower: [UInt8]? = nil, to upper: [UInt8]? = nil, reverse: Bool = false
    ) throws -> [(key: [UInt8], value: [UInt8])] {
        var result: [(key: [UInt8], value: [UInt8])] = []
        try forEach(tree, from: lower, to: upper, reverse: reverse) { key, value in
            result.append((key, value))
            return true
        }
        return result
    }

    /// Calls `body` for each entry with `lower <= key < upper`, in ascending
    /// or descending order, until it returns false.
    public func forEach(
        _ tree: Tree, from lower: [UInt8]? = nil, to upper: [UInt8]? = nil, reverse: Bool = false,
        _ body: ([UInt8], [UInt8]) throws -> Bool
    ) throws {
        let cursor = try self.cursor(tree)
        var more: Bool
        if reverse {
            if let upper {
                more = try cursor.seek(upper)
                more = more ? try cursor.previous() : try cursor.last()
            } else {
                more = try cursor.last()
            }
        } else {
            if let lower { more = try cursor.seek(lower) } else { more = try cursor.first() }
        }
        while more {
            let key = try cursor.key()
            if !reverse, let upper, key.lexicographicallyPrecedes(upper) == false { break }
            if reverse, let lower, key.lexicographicallyPrecedes(lower) { break }
            guard try body(key, try cursor.value()) else { return }
            more = reverse ? try cursor.previous() : try cursor.next()
        }
    }
}
