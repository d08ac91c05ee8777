import Foundation

/// How a fetch orders what it found: by sort keys read from records, ties
/// by row, with a partial selection under a limit.
enum QuerySort {
    /// Sorts by the keys, ties by row; only the first `offset + limit`
    /// are fully ordered when a limit is given (a partial selection).
    static func sorted(
        _ entries: [(keys: [QueryValue], row: Int64)], keys: [QueryPlan.SortKey], offset: Int, limit: Int?
    ) -> [Int64] {
        func less(_ a: (keys: [QueryValue], row: Int64), _ b: (keys: [QueryValue], row: Int64)) -> Bool {
            for (index, key) in keys.enumerated() {
                var result = compare(a.keys[index], b.keys[index], key.stringComparator)
                if key.reverse { result = reversed(result) }
                if result != .orderedSame { return result == .orderedAscending }
            }
            return a.row < b.row
        }
        let wanted = limit.map { offset + $0 } ?? entries.count
        var ordered: [(keys: [QueryValue], row: Int64)]
        if wanted < entries.count / 8 {
            // Top-k: keep the best `wanted` in a sorted buffer.
            ordered = []
            ordered.reserveCapacity(wanted + 1)
            for entry in entries {
                if ordered.count == wanted, let last = ordered.last, !less(entry, last) { continue }
                var low = 0
                var high = ordered.count
                while low < high {
                    let mid = (low + high) / 2
                    if less(ordered[mid], entry) { low = mid + 1 } else { high = mid }
                }
                ordered.insert(entry, at: low)
                if ordered.count > wanted { ordered.removeLast() }
            }
        } else {
            ordered = entries.sorted(by: less)
        }
        let start = min(offset, ordered.count)
        let end = min(wanted, ordered.count)
        return ordered[start..<max(start, end)].map(\.row)
    }

    static func reversed(_ result: ComparisonResult) -> ComparisonResult {
        switch result {
        case .orderedAscending: return .orderedDescending
        case .orderedDescending: return .orderedAscending
        case .orderedSame: return .orderedSame
        }
    }

    /// True for a Double, Float or Date attribute (optional or not), whose
    /// sort order is IEEE 754 totalOrder (``QueryValue/sortOrder(_:_:)``).
    static func sortsInTotalOrder(_ property: Schema.Property) -> Bool {
        switch property.storedKind {
        case .double, .float, .date: return QueryPlanner.sortsAsStored(property.valueType)
        default: return false
        }
    }

    /// A sort's order of two values: nil first, strings through the
    /// descriptor's comparator, doubles in totalOrder (Swift's `<` on
    /// everything else).
    static func compare(_ a: QueryValue, _ b: QueryValue, _ comparator: String.StandardComparator?)
        -> ComparisonResult
    {
        switch (a.isNull, b.isNull) {
        case (true, true): return .orderedSame
        case (true, false): return .orderedAscending
        case (false, true): return .orderedDescending
        default: break
        }
        if let comparator, case .scalar(.string(let x)) = a, case .scalar(.string(let y)) = b {
            return comparator.compare(x, y)
        }
        return QueryValue.sortOrder(a, b) ?? .orderedSame
    }
}
