/// The write transaction's private page images, by page number.
///
/// A dense array of (number, page) indexed by a ``PageMap``, which grows by
/// doubling. The standard `Dictionary` spent a quarter of a bulk load's
/// instructions hashing page numbers with SipHash: every descent looks each
/// page up here first. Page numbers are the store's own, not chosen by an
/// attacker, so the multiplicative hash is enough.
struct DirtyPages {
    private var map = PageMap(capacity: 32)
    /// Entries the map was sized for; it is rebuilt twice as large beyond.
    private var mapCapacity = 32
    private(set) var numbers: [UInt32] = []
    private(set) var pages: [Page] = []

    var count: Int { numbers.count }
    var isEmpty: Bool { numbers.isEmpty }

    /// The page image of `number`; assigning nil removes it.
    subscript(number: UInt32) -> Page? {
        @inline(__always) get {
            guard let i = map[UInt64(number)] else { return nil }
            return pages[i]
        }
        set {
            guard let newValue else {
                remove(number)
                return
            }
            if let i = map[UInt64(number)] {
                pages[i] = newValue
                return
            }
            if numbers.count == mapCapacity { grow() }
            map[UInt64(number)] = numbers.count
            numbers.append(number)
            pages.append(newValue)
        }
    }

    /// Removes `number`; the last entry takes its place in the arrays.
    mutating func remove(_ number: UInt32) {
        guard let i = map.remove(UInt64(number)) else { return }
        let last = numbers.count - 1
        if i != last {
            numbers[i] = numbers[last]
            pages[i] = pages[last]
            map[UInt64(numbers[i])] = i
        }
        numbers.removeLast()
        pages.removeLast()
    }

    mutating func removeAll() {
        numbers.removeAll()
        pages.removeAll()
        mapCapacity = 32
        map = PageMap(capacity: mapCapacity)
    }

    private mutating func grow() {
        mapCapacity *= 2
        map = PageMap(capacity: mapCapacity)
        for (i, number) in numbers.enumerated() { map[UInt64(number)] = i }
    }
}
