import Foundation

extension QueryPlanner {
    /// The order of a fetch sorted by `sortBy` whose rows come from
    /// `access`, and the access path to use for it; nil without a sort.
    ///
    /// Sorting on attributes whose stored value orders as the attribute does
    /// reads sort keys from records (`.keys`); anything else sorts the
    /// models (`.models`). One key that an index of the access path already
    /// orders by, or (under a limit) the first column of an index, is read
    /// in index order instead (`.index`), forwards or backwards.
    func order<T>(for sortBy: [SortDescriptor<T>], access: QueryPlan.Access, limit: Int?)
        -> (order: QueryPlan.Order, access: QueryPlan.Access)?
    {
        guard !sortBy.isEmpty else { return nil }
        var keys: [QueryPlan.SortKey] = []
        for sort in sortBy {
            guard let path = sort.keyPath,
                let property = entity.attribute(at: path),
                property.storedKind.sortsByQueryValue, entity.externalTrees[property.field] == nil,
                Self.sortsAsStored(property.valueType)
            else { return (.models, access) }
            keys.append(
                QueryPlan.SortKey(property: property, reverse: sort.order == .reverse, stringComparator: sort.stringComparator))
        }
        guard keys.count == 1, keys[0].property.storedKind.sortsByKeyOrder else { return (.keys(keys), access) }
        let key = keys[0]
        switch access {
        case .index(var scan) where scan.ranges.count == 1 && scan.group.properties.count > scan.boundColumns:
            guard scan.group.properties[scan.boundColumns] === key.property else { return (.keys(keys), access) }
            scan.reverse = key.reverse
            return (.index(reverse: key.reverse), .index(scan))
        case .scan where limit != nil:
            guard let group = entity.keyGroups.first(where: { $0.properties.first === key.property }) else {
                return (.keys(keys), access)
            }
            let scan = QueryPlan.IndexScan(
                group: group, ranges: [QueryPlan.KeyRange(lower: [], upper: nil)], reverse: key.reverse,
                condition: "every entry", estimate: rowCount, covered: [], boundColumns: 0)
            return (.index(reverse: key.reverse), .index(scan))
        default:
            return (.keys(keys), access)
        }
    }

    /// True for types whose order is their stored value's order: numbers,
    /// dates and strings, not enums (ordered by their own `<`).
    static func sortsAsStored(_ type: Any.Type) -> Bool {
        if let optional = type as? any _OptionalMarker.Type { return sortsAsStored(optional._wrappedType) }
        return type is any _KeyElementConvertible.Type
    }
}
