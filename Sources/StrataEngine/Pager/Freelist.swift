/// The set of free pages, held in memory by the writer and persisted at
/// commit as a chain of trunk pages (layout in `PageLayout.swift`).
///
/// Trunk pages are themselves free pages: the set of free pages is every
/// trunk plus every page number a trunk lists. Allocation takes the lowest
/// free page first, so that data drifts towards the start of the file and
/// the free tail can be cut off (see `releaseTail`).
struct Freelist {
    /// Free page numbers. Sorted descending while `sorted` is true, so the
    /// lowest is `last`.
    private(set) var pages: [UInt32] = []
    private var sorted = true
    /// True once this transaction changed the set.
    var changed = false

    var count: Int { pages.count }

    init() {}

    init(loaded: [UInt32]) {
        pages = loaded
        sorted = false
    }

    mutating func allocate() -> UInt32? {
        guard !pages.isEmpty else { return nil }
        sortIfNeeded()
        changed = true
        return pages.removeLast()
    }

    mutating func free(_ page: UInt32) {
        pages.append(page)
        sorted = false
        changed = true
    }

    private mutating func sortIfNeeded() {
        if !sorted {
            pages.sort(by: >)
            sorted = true
        }
    }

    /// Removes free pages at the end of the store and returns the new page
    /// count: the file can then be truncated at the next checkpoint.
    mutating func releaseTail(pageCount: UInt32) -> UInt32 {
        sortIfNeeded()
        var count = pageCount
        var k = 0
        while k < pages.count, pages[k] == count - 1 {
            k += 1
            count -= 1
        }
        if k > 0 {
            pages.removeFirst(k)
            changed = true
        }
        return count
    }

    /// Splits the set into trunk pages and the numbers they list. Trunks are
    /// the lowest free pages: never in the releasable tail while other free
    /// pages are below them, and the first to be reused by `allocate`.
    func layout(pageSize: Int) -> [(trunk: UInt32, entries: ArraySlice<UInt32>)] {
        guard !pages.isEmpty else { return [] }
        let ascending = sorted ? Array(pages.reversed()) : pages.sorted()
        let capacity = Layout.trunkCapacity(pageSize: pageSize)
        let trunkCount = (ascending.count + capacity) / (capacity + 1)
        let entries = ascending[trunkCount...]
        var result: [(UInt32, ArraySlice<UInt32>)] = []
        var start = entries.startIndex
        for t in 0..<trunkCount {
            let end = min(start + capacity, entries.endIndex)
            result.append((ascending[t], entries[start..<end]))
            start = end
        }
        return result
    }
}
