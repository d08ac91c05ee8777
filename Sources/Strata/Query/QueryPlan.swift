import Foundation
import StrataEngine

// Over 500 lines: the plan's types and the planner that chooses access
// paths by cost (the sort order is in QueryPlanner+Order.swift).

/// How a fetch finds its rows, filters and orders them: chosen by
/// ``QueryPlanner``, run by the fetch methods, shown by
/// ``ModelContext/explain(_:)``.
struct QueryPlan {
    /// A run of keys `lower <= key < upper` (nil: to the end) of one tree.
    struct KeyRange: Equatable {
        var lower: [UInt8]
        var upper: [UInt8]?
    }

    /// Ranges of one unique constraint's or index's tree.
    struct IndexScan {
        let group: KeyGroup
        var ranges: [KeyRange]
        /// Read from the last key back (for a descending sort).
        var reverse = false
        /// What the ranges select, for explain.
        var condition: String
        var estimate: Double
        /// The conjuncts the ranges answer exactly (left out of the filter).
        var covered: Set<Int>
        /// How many leading columns the ranges bind to a single value.
        var boundColumns: Int
    }

    indirect enum Access {
        /// Every row, in row order.
        case scan
        /// Rows named by `persistentModelID ==` conditions.
        case rows([Int64])
        case index(IndexScan)
        /// Rows any of the accesses find (an `||` of indexed conditions).
        case union([Access])
        /// Rows every access finds (conjuncts on different indexes).
        case intersection([Access])
    }

    /// How results are ordered.
    enum Order {
        /// No sort: the order of the access path (row order for an index
        /// scan without a limit or an offset; see `QueryRun`).
        case none
        /// The access path's index order is the sort order.
        case index(reverse: Bool)
        /// Sort keys read from records (top-k under a limit).
        case keys([SortKey])
        /// A sort on materialized models through the descriptors.
        case models
    }

    /// One sort descriptor on a stored attribute of the fetched entity.
    struct SortKey {
        let property: Schema.Property
        let reverse: Bool
        /// `String.StandardComparator` of a string sort (SwiftData's
        /// default is `.localizedStandard`).
        let stringComparator: String.StandardComparator?
    }

    var entityName: String
    var access: Access
    /// The conditions the access path does not answer, run on records
    /// (or on models when ``needsModel``).
    var filter: QueryExpr?
    /// The filter reads a property only models have.
    var needsModel = false
    /// Part of the predicate is left to `Predicate.evaluate` on models.
    var foundationCheck = false
    var order: Order = .none
    var offset: Int?
    var limit: Int?
}

// MARK: - Explain

extension QueryPlan: CustomStringConvertible {
    /// The plan as lines of text: the access path, then filter, order and
    /// paging. Tests pin it.
    var description: String {
        var lines: [String] = []
        Self.describe(access, entity: entityName, indent: "", into: &lines)
        if let filter { lines.append("filter\(needsModel ? " on models" : ""): \(filter)") }
        if foundationCheck { lines.append("then Predicate.evaluate on models") }
        switch order {
        case .none: break
        case .index(let reverse): lines.append("order: index order\(reverse ? ", reversed" : "")")
        case .keys(let keys):
            let names = keys.map { "\($0.property.name)\($0.reverse ? " descending" : "")" }
            lines.append(
                "order: sort by \(names.joined(separator: ", "))\(limit != nil ? " (top \((offset ?? 0) + (limit ?? 0)))" : "")")
        case .models: lines.append("order: sort models by descriptors")
        }
        if let offset, offset > 0 { lines.append("offset \(offset)") }
        if let limit { lines.append("limit \(limit)") }
        return lines.joined(separator: "\n")
    }

    private static func describe(_ access: Access, entity: String, indent: String, into lines: inout [String]) {
        switch access {
        case .scan:
            lines.append(indent + "scan \(entity)")
        case .rows(let rows):
            // A to-many's members can be millions: the first few stand for them.
            let listed = rows.prefix(8).map(String.init).joined(separator: ", ")
            let more = rows.count > 8 ? ", … (\(rows.count) rows)" : ""
            lines.append(indent + "rows \(listed)\(more) of \(entity)")
        case .index(let scan):
            let seeks = scan.ranges.count > 1 ? ", \(scan.ranges.count) ranges" : ""
            let direction = scan.reverse ? ", reversed" : ""
            lines.append(indent + "\(scan.group.kind.rawValue) \(scan.group.treeName): \(scan.condition)\(seeks)\(direction)")
        case .union(let parts):
            lines.append(indent + "union")
            for part in parts { describe(part, entity: entity, indent: indent + "  ", into: &lines) }
        case .intersection(let parts):
            lines.append(indent + "intersection")
            for part in parts { describe(part, entity: entity, indent: indent + "  ", into: &lines) }
        }
    }
}

// MARK: - Planning

/// Chooses a ``QueryPlan`` for a translated predicate and sort order.
///
/// - Conjuncts of the form `attribute op constant` (`==`, `<`, `<=`, `>`,
///   `>=`, a range's `contains`, a captured array's `contains`, a string's
///   `starts(with:)`, a Bool attribute alone or negated) become bounds on
///   that attribute. Bounds on the leading columns of a unique constraint
///   or index become key ranges: equalities (and IN lists, one range per
///   value) on a prefix of the columns, then a range on the next one.
/// - Each index is costed from the tree's statistics
///   (`estimatedCount(_:from:to:)`: two descents per range, no scan)
///   against a scan of every record; the cheapest wins. A second index is
///   intersected with the first when reading its keys costs less than the
///   record lookups it saves.
/// - An `||` whose every side has an index path becomes a union.
/// - What the ranges answer exactly is left out of the filter; the rest
///   (and every `starts(with:)`, which compares characters rather than
///   bytes) is evaluated on each candidate's record.
struct QueryPlanner {
    let entity: Schema.Entity
    let snapshot: ModelContext.Snapshot
    let rowCount: Double
    /// The store's identifier: an identifier of another store names no row.
    let storeIdentifier: String

    /// Bounds on one attribute, as encoded key elements.
    struct Bound {
        var equal: [[UInt8]]?
        var lower: (key: [UInt8], inclusive: Bool)?
        var upper: (key: [UInt8], inclusive: Bool)?
        var conjuncts: Set<Int> = []
        var exact = true
        var text: [String] = []
    }

    init(entity: Schema.Entity, snapshot: ModelContext.Snapshot, storeIdentifier: String) throws {
        self.entity = entity
        self.snapshot = snapshot
        self.storeIdentifier = storeIdentifier
        let tree = try snapshot.tree(entity.recordTree)
        self.rowCount = Double(try tree.map { try snapshot.tx.count($0) } ?? 0)
    }

    /// The cost of reading `entries` index entries over `seeks` ranges and
    /// then each entry's record, in units of one record of a scan.
    func indexCost(entries: Double, seeks: Int) -> Double {
        Double(seeks) * 2 + entries * 2.8
    }

    /// The best access for `conjuncts` (joined by `&&`), with the set of
    /// conjuncts it answers exactly; `.scan` when no index helps.
    func access(for conjuncts: [QueryExpr]) throws -> (access: QueryPlan.Access, covered: Set<Int>, cost: Double) {
        let scanCost = rowCount
        var candidates: [(QueryPlan.Access, Set<Int>, Double)] = []
        var bounds: [Int: Bound] = [:]
        var identifiers: [Int64]?
        var identified: Set<Int> = []
        for (index, conjunct) in conjuncts.enumerated() {
            if let rows = try Self.identifierRows(conjunct, entity: entity, store: storeIdentifier)
                ?? relatedRows(conjunct)
            {
                identifiers = identifiers.map { Array(Set($0).intersection(rows)) } ?? rows
                identified.insert(index)
                continue
            }
            if let (field, bound) = Self.bound(of: conjunct, entity: entity) {
                bounds[field, default: Bound()].merge(bound, conjunct: index)
            }
        }
        if let identifiers {
            return (.rows(Array(Set(identifiers)).sorted()), identified, Double(identifiers.count))
        }
        for group in entity.keyGroups {
            if let scan = try indexScan(group, bounds: bounds) {
                candidates.append((.index(scan), scan.covered, indexCost(entries: scan.estimate, seeks: scan.ranges.count)))
            }
        }
        for (index, conjunct) in conjuncts.enumerated() {
            guard case .or = conjunct else { continue }
            var parts: [QueryPlan.Access] = []
            var cost = 0.0
            for side in Self.disjuncts(conjunct) {
                let (part, _, partCost) = try access(for: Self.conjuncts(side))
                if case .scan = part { break }
                parts.append(part)
                cost += partCost
            }
            if parts.count == Self.disjuncts(conjunct).count {
                candidates.append((.union(parts), [], cost))
            }
            _ = index
        }
        candidates.sort { $0.2 < $1.2 }
        guard let best = candidates.first, best.2 < scanCost else { return (.scan, [], scanCost) }
        // Intersect with a second index when its keys cost less than the
        // record lookups they save.
        if case .index(let first) = best.0 {
            for other in candidates.dropFirst() {
                guard case .index(let second) = other.0, second.group.treeName != first.group.treeName,
                    !second.covered.isSubset(of: first.covered)
                else { continue }
                let together = rowCount > 0 ? first.estimate * second.estimate / rowCount : 0
                let cost =
                    Double(first.ranges.count + second.ranges.count) * 2 + (first.estimate + second.estimate) * 0.3
                    + together * 2.5
                if cost < best.2 * 0.7 {
                    return (.intersection([best.0, other.0]), best.1.union(other.1), cost)
                }
                break
            }
        }
        return best
    }

    /// The key ranges of `group` that `bounds` select, or nil when its
    /// first column has no bound.
    func indexScan(_ group: KeyGroup, bounds: [Int: Bound]) throws -> QueryPlan.IndexScan? {
        guard let first = group.properties.first, bounds[first.field] != nil else { return nil }
        var prefixes: [[UInt8]] = [[]]
        var covered: Set<Int> = []
        var text: [String] = []
        var boundColumns = 0
        var ranges: [QueryPlan.KeyRange]?
        var allSingle = true
        for property in group.properties {
            guard let bound = bounds[property.field] else { break }
            if let values = bound.equal {
                guard prefixes.count * max(values.count, 1) <= 4096 else { break }
                prefixes = prefixes.flatMap { prefix in values.map { prefix + $0 } }
                if bound.exact { covered.formUnion(bound.conjuncts) }
                text.append(contentsOf: bound.text)
                if values.count == 1 && allSingle { boundColumns += 1 } else { allSingle = false }
                continue
            }
            ranges = prefixes.map { prefix in
                let lower = bound.lower.map { $0.inclusive ? prefix + $0.key : Self.after(prefix + $0.key) } ?? prefix + [0x01]
                let upper =
                    bound.upper.map { $0.inclusive ? Self.successor(prefix + $0.key) : prefix + $0.key } ?? Self.successor(prefix)
                return QueryPlan.KeyRange(lower: lower, upper: upper)
            }
            if bound.exact { covered.formUnion(bound.conjuncts) }
            text.append(contentsOf: bound.text)
            break
        }
        guard !text.isEmpty else { return nil }
        let keyRanges = ranges ?? prefixes.map { QueryPlan.KeyRange(lower: $0, upper: Self.successor($0)) }
        guard let tree = try snapshot.tree(group.treeName) else {
            return QueryPlan.IndexScan(
                group: group, ranges: keyRanges, condition: text.joined(separator: " && "), estimate: 0, covered: covered,
                boundColumns: boundColumns)
        }
        var estimate = 0.0
        if group.kind == .unique && ranges == nil && boundColumns == group.properties.count {
            // Every column equal to one value: at most one row.
            estimate = Double(keyRanges.count)
        } else {
            let sampled = keyRanges.prefix(32)
            for range in sampled {
                estimate += try snapshot.tx.estimatedCount(tree, from: range.lower, to: range.upper)
            }
            estimate *= Double(keyRanges.count) / Double(max(sampled.count, 1))
        }
        return QueryPlan.IndexScan(
            group: group, ranges: keyRanges, condition: text.joined(separator: " && "), estimate: estimate,
            covered: covered, boundColumns: boundColumns)
    }

    // MARK: Reading conditions

    static func conjuncts(_ expression: QueryExpr) -> [QueryExpr] {
        if case .and(let a, let b) = expression { return conjuncts(a) + conjuncts(b) }
        return [expression]
    }

    static func disjuncts(_ expression: QueryExpr) -> [QueryExpr] {
        if case .or(let a, let b) = expression { return disjuncts(a) + disjuncts(b) }
        return [expression]
    }

    /// The attribute of the fetched model an expression reads directly,
    /// when it can be part of a key.
    static func keyAttribute(_ expression: QueryExpr, entity: Schema.Entity) -> Schema.Attribute? {
        guard case .property(.variable(0), let owner, let property) = expression, owner === entity,
            let attribute = property as? Schema.Attribute, attribute.isKeyable, entity.externalTrees[attribute.field] == nil
        else { return nil }
        return attribute
    }

    /// Rows named by `$0.persistentModelID == id` (or `ids.contains(...)`).
    static func identifierRows(_ expression: QueryExpr, entity: Schema.Entity, store: String) -> [Int64]? {
        func rows(_ value: QueryValue) -> [Int64]? {
            switch value {
            case .opaque(let id as PersistentIdentifier):
                // As `==`: an identifier of another store (or of none) names
                // no stored row.
                return id.entityName == entity.name && id.storeIdentifier == store ? [id.rowID] : []
            case .list(let items):
                var result: [Int64] = []
                for item in items {
                    guard let more = rows(item) else { return nil }
                    result += more
                }
                return result
            default: return nil
            }
        }
        switch expression {
        case .compare(.equal, .identifier(.variable(0), let owner), .constant(let value)) where owner === entity:
            return rows(value)
        case .compare(.equal, .constant(let value), .identifier(.variable(0), let owner)) where owner === entity:
            return rows(value)
        case .contains(.constant(let value), .identifier(.variable(0), let owner)) where owner === entity:
            guard case .list = value else { return nil }
            return rows(value)
        default:
            return nil
        }
    }

    /// Rows named by `$0.owner?.persistentModelID == id` (or, for a
    /// non-optional to-one, `$0.owner.persistentModelID == id`): read from
    /// the to-one's reverse index, the entries under the target's row, so
    /// that the members of a to-many of any size are found (and paged and
    /// counted) without a scan. Nil for any other conjunct, or when the
    /// identifier's entity is not the relationship's own destination.
    func relatedRows(_ expression: QueryExpr) throws -> [Int64]? {
        let path: QueryExpr
        let value: QueryValue
        switch expression {
        case .compare(.equal, let a, .constant(let constant)): (path, value) = (a, constant)
        case .compare(.equal, .constant(let constant), let b): (path, value) = (b, constant)
        default: return nil
        }
        guard case .opaque(let id as PersistentIdentifier) = value else { return nil }
        let property: Schema.Property
        switch path {
        case .flatMap(.property(.variable(0), let owner, let held), let variable, .identifier(.variable(let bound), _))
        where owner === entity && bound == variable:
            property = held
        case .identifier(.property(.variable(0), let owner, let held), _) where owner === entity:
            property = held
        default:
            return nil
        }
        guard let relationship = property as? Schema.Relationship, relationship.isToOneRelationship,
            case .toOne(let index)? = entity.relationshipStorage[relationship.field],
            let destination = relationship.destinationType, id.entityName == destination._strataEntityName
        else { return nil }
        // As `==`: an identifier of another store (or of none) names no row.
        guard id.storeIdentifier == storeIdentifier, id.rowID > 0 else { return [] }
        return try snapshot.pairs(index, of: id.rowID)
    }

    /// The bound a conjunct puts on one attribute, by field.
    static func bound(of expression: QueryExpr, entity: Schema.Entity) -> (Int, Bound)? {
        switch expression {
        case .compare(let op, let a, let b):
            if let attribute = keyAttribute(a, entity: entity), case .constant(.scalar(let value)) = b {
                return comparison(op, attribute, value).map { (attribute.field, $0) }
            }
            if let attribute = keyAttribute(b, entity: entity), case .constant(.scalar(let value)) = a {
                return comparison(op.mirrored, attribute, value).map { (attribute.field, $0) }
            }
            return nil
        case .between(let a, .constant(.scalar(let low)), .constant(.scalar(let high)), let closed):
            guard let attribute = keyAttribute(a, entity: entity),
                let order = QueryValue.order(.scalar(low), .scalar(high)), order != .orderedDescending,
                var bound = comparison(.greaterOrEqual, attribute, low),
                let upper = comparison(closed ? .lessOrEqual : .less, attribute, high)
            else { return nil }
            bound.mergeRange(upper)
            bound.text = ["\(attribute.name) in \(QueryValue.scalar(low))\(closed ? "..." : "..<")\(QueryValue.scalar(high))"]
            return (attribute.field, bound)
        case .contains(.constant(.list(let items)), let a):
            guard let attribute = keyAttribute(a, entity: entity) else { return nil }
            var keys: Set<[UInt8]> = []
            for item in items {
                guard case .scalar(let value) = item else { return nil }
                if case .double(let d) = value, d == 0 || d.isNaN { return nil }
                keys.insert(KeyEncoding.encode([value]))
            }
            var bound = Bound()
            bound.equal = keys.sorted { $0.lexicographicallyPrecedes($1) }
            bound.text = ["\(attribute.name) in \(QueryValue.list(items))"]
            return (attribute.field, bound)
        case .prefix(let a, .constant(.scalar(.string(let prefix)))):
            guard let attribute = keyAttribute(a, entity: entity) else { return nil }
            var encoded: [UInt8] = []
            KeyEncoding.append(.string(prefix), to: &encoded)
            encoded.removeLast()  // the terminator: any continuation matches
            var bound = Bound()
            bound.lower = (encoded, true)
            bound.upper = (after(encoded), false)
            bound.exact = false
            bound.text = ["\(attribute.name) starts with \(QueryValue.scalar(.string(prefix)))"]
            return (attribute.field, bound)
        case .property:
            guard let attribute = keyAttribute(expression, entity: entity), attribute.storedKind.isBool else { return nil }
            return comparison(.equal, attribute, .bool(true)).map { (attribute.field, $0) }
        case .not(let inner):
            guard let attribute = keyAttribute(inner, entity: entity), attribute.storedKind.isBool else { return nil }
            return comparison(.equal, attribute, .bool(false)).map { (attribute.field, $0) }
        default:
            return nil
        }
    }

    /// The bound of `attribute op value`.
    static func comparison(_ op: QueryExpr.ComparisonOperator, _ attribute: Schema.Attribute, _ value: KeyEncoding.Element)
        -> Bound?
    {
        var bound = Bound()
        bound.text = ["\(attribute.name) \(op.rawValue) \(QueryValue.scalar(value))"]
        let key = KeyEncoding.encode([value])
        if case .double(let d) = value {
            // Swift's == and < on doubles: -0.0 equals 0.0, NaN matches
            // nothing; stored NaNs sort outside ±infinity in keys, so
            // open ends stop at the infinities.
            let negativeZero = KeyEncoding.encode([.double(-0.0)])
            let positiveZero = KeyEncoding.encode([.double(0.0)])
            let low = KeyEncoding.encode([.double(-.infinity)])
            let high = KeyEncoding.encode([.double(.infinity)])
            if d.isNaN {
                guard op != .notEqual else { return nil }
                bound.equal = []
                return bound
            }
            switch op {
            case .notEqual: return nil
            case .equal:
                if d == 0 {
                    bound.lower = (negativeZero, true)
                    bound.upper = (positiveZero, true)
                } else {
                    bound.equal = [key]
                }
            case .less:
                bound.lower = (low, true)
                bound.upper = (d == 0 ? negativeZero : key, false)
            case .lessOrEqual:
                bound.lower = (low, true)
                bound.upper = (d == 0 ? positiveZero : key, true)
            case .greater:
                bound.lower = (d == 0 ? positiveZero : key, false)
                bound.upper = (high, true)
            case .greaterOrEqual:
                bound.lower = (d == 0 ? negativeZero : key, true)
                bound.upper = (high, true)
            }
            return bound
        }
        switch op {
        case .notEqual: return nil
        case .equal: bound.equal = [key]
        case .less: bound.upper = (key, false)
        case .lessOrEqual: bound.upper = (key, true)
        case .greater: bound.lower = (key, false)
        case .greaterOrEqual: bound.lower = (key, true)
        }
        if value == .null && op != .equal { return nil }
        return bound
    }

    /// The smallest byte string greater than every string that starts
    /// with `bytes`; nil when there is none (all 0xFF).
    static func successor(_ bytes: [UInt8]) -> [UInt8]? {
        var result = bytes
        while let last = result.last {
            if last < 0xFF {
                result[result.count - 1] = last + 1
                return result
            }
            result.removeLast()
        }
        return nil
    }

    /// ``successor(_:)``, or a key past every key that starts with `bytes`
    /// when there is none (keys never consist of 0xFF bytes only).
    static func after(_ bytes: [UInt8]) -> [UInt8] { successor(bytes) ?? bytes + [0xFF] }
}

extension QueryPlanner.Bound {
    /// Adds the bound of another conjunct on the same attribute: equalities
    /// intersect, ranges narrow.
    mutating func merge(_ other: QueryPlanner.Bound, conjunct: Int) {
        conjuncts.insert(conjunct)
        exact = exact && other.exact
        text += other.text
        if let values = other.equal {
            equal = equal.map { Array(Set($0).intersection(values)).sorted { $0.lexicographicallyPrecedes($1) } } ?? values
        }
        mergeRange(other)
    }

    mutating func mergeRange(_ other: QueryPlanner.Bound) {
        if let low = other.lower {
            if let current = lower {
                if current.key.lexicographicallyPrecedes(low.key) || (current.key == low.key && !low.inclusive) { lower = low }
            } else {
                lower = low
            }
        }
        if let high = other.upper {
            if let current = upper {
                if high.key.lexicographicallyPrecedes(current.key) || (current.key == high.key && !high.inclusive) {
                    upper = high
                }
            } else {
                upper = high
            }
        }
        if var values = equal, lower != nil || upper != nil {
            // An equality with a range on the same attribute: keep the
            // values inside the range.
            values.removeAll { key in
                if let lower, key.lexicographicallyPrecedes(lower.key) || (key == lower.key && !lower.inclusive) { return true }
                if let upper, upper.key.lexicographicallyPrecedes(key) || (key == upper.key && !upper.inclusive) { return true }
                return false
            }
            equal = values
            lower = nil
            upper = nil
        }
    }
}

extension StoredKind {
    var isBool: Bool {
        if case .bool = self { return true }
        return false
    }

    /// Sorting by index order agrees with `SortDescriptor` for these
    /// (strings sort by a `String.StandardComparator`, not by code points).
    var sortsByKeyOrder: Bool {
        switch self {
        case .signed, .unsigned, .double, .float, .date: return true
        default: return false
        }
    }

    /// The sort keys of these can be read from records and compared here.
    var sortsByQueryValue: Bool {
        switch self {
        case .signed, .unsigned, .double, .float, .date, .string: return true
        default: return false
        }
    }
}
