/// The write transaction's private page images, by page number.
///
/// A dense array of (number, page) indexed by a ``PageMap``, which grows by
/// doubling. The standard `Dictionary` spent a quarter of a bulk load's
/// instructions hashing page numbers with SipHash: every descent looks each
/// page up here first. Page numbers are the store's own, not chosen by an
/// attacker, so the multiplicative hash is enough.
struct DirtyPages {
    /// Up to this many pages are found by a scan of `numbers`, with no
    /// table: a small commit (a one-object save dirties five or six) then
    /// allocates none (its two arrays, with the runtime's metadata lookup
    /// of each, cost about 1,400 instructions a commit).
    private static let scanned = 16
    /// Shared by every instance until it holds more than `scanned` pages;
    /// never written while shared (`mapCapacity` is 0 until then).
    private static let emptyMap = PageMap(capacity: 1)
    private var map = Self.emptyMap
    /// Entries the map was sized for (0: none, pages are scanned); it is
    /// rebuilt twice as large beyond.
    private var mapCapacity = 0
    private(set) var numbers: [UInt32] = []
    private(set) var pages: [Page] = []

    var count: Int { numbers.count }
    var isEmpty: Bool { numbers.isEmpty }

    /// The page image of `number`; assigning nil removes it.
    subscript(number: UInt32) -> Page? {
        @inline(__always) get {
            guard let i = index(of: number) else { return nil }
            return pages[i]
        }
        set {
            guard let newValue else {
                remove(number)
                return
            }
            if let i = index(of: number) {
                pages[i] = newValue
                return
            }
            if numbers.count == max(mapCapacity, Self.scanned) { grow() }
            if mapCapacity > 0 { map[UInt64(number)] = numbers.count }
            numbers.append(number)
            pages.append(newValue)
        }
    }

    @inline(__always) private func index(of number: UInt32) -> Int? {
        mapCapacity == 0 ? numbers.firstIndex(of: number) : map[UInt64(number)]
    }

    /// Removes `number`; the last entry takes its place in the arrays.
    mutating func remove(_ number: UInt32) {
        guard let i = mapCapacity == 0 ? numbers.firstIndex(of: number) : map.remove(UInt64(number)) else { return }
        let last = numbers.count - 1
        if i != last {
            numbers[i] = numbers[last]
            pages[i] = pages[last]
            if mapCapacity > 0 { map[UInt64(numbers[i])] = i }
        }
        numbers.removeLast()
        pages.removeLast()
    }

    mutating func removeAll() {
        numbers.removeAll()
        pages.removeAll()
        mapCapacity = 0
        map = Self.emptyMap
    }

    private mutating func grow() {
        mapCapacity = max(2 * Self.scanned, mapCapacity * 2)
        map = PageMap(capacity: mapCapacity)
        for (i, number) in numbers.enumerated() { map[UInt64(number)] = i }
    }
}
