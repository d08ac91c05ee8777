/// Catalog entries (root page, entry count) as of one position, shared by
/// every transaction of a handle that starts from that state: a fetch
/// opens a read transaction and looks up the same few trees each time, and
/// a catalog search costs a page load and two allocations. Readers fill
/// it; a write transaction that created, dropped or renamed no tree fills
/// it too and, when it commits, moves it to the commit's position with its
/// new entry counts, so the next writer (and the readers once the commit is
/// published) find its trees without a search. Replaced when a transaction
/// of a newer position looks a tree up.
///
/// Every field is guarded by `lock`, its own (every save takes it several
/// times, and the state lock is held by a group commit's leader while it
/// publishes): a leaf, lock 8 of the order stated in Lock.swift.
final class CatalogCache: @unchecked Sendable {
    private let lock = Lock()
    /// By name, each with the name it was remembered under: `String`'s
    /// equality takes two spellings of one Unicode name (precomposed,
    /// decomposed) as one key, while the catalog keys trees by their bytes.
    @exclusivity(unchecked) private var entries: [String: (name: String, root: UInt32, count: Int)] = [:]
    @exclusivity(unchecked) private var position = UInt64.max
    /// Set by ``forget()``: nothing is remembered from then on.
    @exclusivity(unchecked) private var off = false

    /// The catalog entry of `name` as of position `position`, if a
    /// transaction of that position looked it up already; root 0 when it
    /// found no such tree.
    func entry(_ name: String, position: UInt64) -> (root: UInt32, count: Int)? {
        lock.withLock {
            guard self.position == position, let entry = entries[name], entry.name.hasSameBytes(as: name) else {
                return nil
            }
            return (entry.root, entry.count)
        }
    }

    /// Remembers the catalog entry of `name` as of position `position`
    /// (root 0: there is no such tree).
    func remember(_ name: String, position: UInt64, root: UInt32, count: Int) {
        lock.withLock {
            guard !off else { return }
            if self.position != position {
                guard position > self.position || self.position == .max else { return }
                self.position = position
                entries.removeAll(keepingCapacity: true)
            }
            entries[name] = (name, root, count)
        }
    }

    /// A commit made at `to` from the state at `from` without creating,
    /// dropping or renaming a tree: the entries remembered for `from` hold
    /// at `to` too, with the entry counts of the trees it changed
    /// (`changed`: root → name, `counts`: root → new count).
    func advance(from: UInt64, to: UInt64, changed: [UInt32: String], counts: [UInt32: Int]) {
        lock.withLock {
            guard !off, position == from, to > from else { return }
            position = to
            for (root, name) in changed { entries[name] = (name, root, counts[root] ?? 0) }
        }
    }

    /// Forgets every remembered entry, for a handle whose pending commits
    /// failed without poisoning it (a log write failed): the positions
    /// they advanced the cache to will be reached again by other commits.
    func reset() {
        lock.withLock {
            position = .max
            entries.removeAll()
        }
    }

    /// Forgets every remembered entry and remembers none from then on, for
    /// a handle whose sync failed: positions past the published state (its
    /// failed commits) may be reused by other processes' commits.
    func forget() {
        lock.withLock {
            off = true
            position = .max
            entries.removeAll()
        }
    }
}

extension String {
    /// Whether the two strings are the same UTF-8 bytes, which is how the
    /// catalog compares tree names (`==` takes canonically equivalent
    /// spellings, such as a precomposed and a decomposed letter, as equal).
    /// Native strings compare their lengths, then their storage.
    func hasSameBytes(as other: String) -> Bool {
        let count = utf8.count
        guard count == other.utf8.count else { return false }
        guard count > 0 else { return true }
        let same = utf8.withContiguousStorageIfAvailable { a in
            other.utf8.withContiguousStorageIfAvailable { b in compareBytes(a.baseAddress!, count, b.baseAddress!, count) == 0 }
        }
        if let same = same ?? nil { return same }
        return utf8.elementsEqual(other.utf8)
    }
}
