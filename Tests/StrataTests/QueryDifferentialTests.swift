import Foundation
import StrataTesting
import XCTest

@testable import Strata

private typealias BoolExpression = any StandardPredicateExpression<Bool>
private typealias Subject = PredicateExpressions.Variable<Gadget>

/// Random predicates, sort orders and pages over random data, some with
/// unsaved changes in the context: every fetch, count and identifier list
/// must equal `Predicate.evaluate` plus a reference sort over every model.
///
/// The seed is printed; `STRATA_SEED=<n>` replays a run.
final class QueryDifferentialTests: StoreTestCase {
    func testRandomPredicatesMatchTheReference() throws {
        let seed = SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "QueryDifferentialTests")
        var random = SeededRandom(seed: seed)
        let container = try self.container(for: [Gadget.self, Maker.self, Part.self])
        var checked = 0
        for round in 0..<4 {
            let context = ModelContext(container)
            if round == 0 { try populate(context, random: &random) }
            var live = try context.fetch(FetchDescriptor<Gadget>())
            if round > 0 { editWithoutSaving(context, &live, random: &random) }
            for _ in 0..<500 {
                var descriptor = FetchDescriptor<Gadget>(predicate: Predicate { self.condition($0, depth: 0, &random) })
                descriptor.sortBy = sortOrder(&random)
                if random.below(3) == 0 { descriptor.fetchLimit = random.below(30) }
                if random.below(4) == 0 { descriptor.fetchOffset = random.below(20) }
                try compare(descriptor, context: context, live: live, seed: seed)
                checked += 1
            }
            if round > 0 { try context.save() }
        }
        XCTAssertEqual(checked, 2000)
    }

    private func compare(_ descriptor: FetchDescriptor<Gadget>, context: ModelContext, live: [Gadget], seed: UInt64) throws {
        let expected: [Gadget]
        do {
            expected = try QueryPlanTests.reference(live, descriptor)
        } catch {
            // Foundation refuses this input (a forced unwrap of nil): Strata
            // must throw too, never trap.
            XCTAssertThrowsError(try context.fetch(descriptor), "seed \(seed): \(descriptor.predicate!)")
            return
        }
        let plan = (try? context.explain(descriptor)) ?? "?"
        let note =
            "seed \(seed)\npredicate: \(descriptor.predicate!)\nsort: \(descriptor.sortBy.count) descriptors, offset \(descriptor.fetchOffset ?? 0), limit \(descriptor.fetchLimit ?? -1)\nplan:\n\(plan)"
        let fetched = try context.fetch(descriptor)
        if descriptor.sortBy.isEmpty {
            if descriptor.fetchLimit == nil && descriptor.fetchOffset == nil {
                XCTAssertEqual(Set(fetched.map(ObjectIdentifier.init)), Set(expected.map(ObjectIdentifier.init)), note)
            } else {
                let all = Set(try QueryPlanTests.reference(live, descriptor, paged: false).map(ObjectIdentifier.init))
                XCTAssertEqual(fetched.count, expected.count, note)
                XCTAssertTrue(Set(fetched.map(ObjectIdentifier.init)).isSubset(of: all), note)
            }
        } else {
            XCTAssertEqual(fetched.map(\.uid), expected.map(\.uid), note)
        }
        XCTAssertEqual(try context.fetchCount(descriptor), expected.count, note)
        XCTAssertEqual(try context.fetchIdentifiers(descriptor), fetched.map(\.persistentModelID), note)
    }

    // MARK: Data

    private func populate(_ context: ModelContext, random: inout SeededRandom) throws {
        let makers = (0..<6).map { Maker(name: "m\($0)", country: $0 % 2 == 0 ? "FR" : "DE") }
        for uid in 0..<400 {
            let gadget = makeGadget(uid: uid, random: &random)
            context.insert(gadget)
            gadget.maker = random.below(5) == 0 ? nil : makers[random.below(makers.count)]
            for index in 0..<random.below(3) {
                gadget.parts.append(Part(label: "p\(uid).\(index)", weight: random.below(12)))
            }
        }
        try context.save()
    }

    private func makeGadget(uid: Int, random: inout SeededRandom) -> Gadget {
        let names = ["n1", "n2", "n10", "n11", "Élan", "élan", "e\u{301}lan", "", "zeta", "n2x"]
        let gadget = Gadget(
            uid: uid, score: random.below(60) - 10, name: names[random.below(names.count)],
            rating: [-0.0, 0.0, 1.5, -2.25, 3.75, 100][random.below(6)], flag: random.below(2) == 0,
            category: Status.allCases[random.below(3)])
        gadget.note = random.below(3) == 0 ? nil : "note \(random.below(5))"
        gadget.size = random.below(4) == 0 ? nil : random.below(8)
        gadget.address = random.below(2) == 0 ? nil : Address(street: "s", city: "c\(random.below(4))")
        return gadget
    }

    /// Unsaved changes: edits, deletes and inserts (a round saves them at
    /// its end, so the next round starts from them).
    private func editWithoutSaving(_ context: ModelContext, _ live: inout [Gadget], random: inout SeededRandom) {
        for _ in 0..<20 {
            let gadget = live[random.below(live.count)]
            gadget.score = random.below(60) - 10
            gadget.name = ["n1", "n3", "Élan"][random.below(3)]
            gadget.size = random.below(2) == 0 ? nil : random.below(8)
        }
        for _ in 0..<10 {
            let index = random.below(live.count)
            context.delete(live[index])
            live.remove(at: index)
        }
        for _ in 0..<10 {
            let gadget = makeGadget(uid: 10_000 + random.below(1_000_000), random: &random)
            context.insert(gadget)
            live.append(gadget)
        }
    }

    // MARK: Random predicates

    private func condition(_ v: Subject, depth: Int, _ random: inout SeededRandom) -> BoolExpression {
        if depth < 3 {
            switch random.below(8) {
            case 0: return and(condition(v, depth: depth + 1, &random), condition(v, depth: depth + 1, &random))
            case 1: return or(condition(v, depth: depth + 1, &random), condition(v, depth: depth + 1, &random))
            case 2: return not(condition(v, depth: depth + 1, &random))
            default: break
            }
        }
        return leaf(v, &random)
    }

    private func leaf(_ v: Subject, _ random: inout SeededRandom) -> BoolExpression {
        switch random.below(13) {
        case 0: return comparison(v, \.score, random.below(70) - 15, &random)
        case 1: return comparison(v, \.uid, random.below(420), &random)
        case 2: return comparison(v, \.name, ["n1", "n10", "Élan", "élan", "e\u{301}lan", "", "z"][random.below(7)], &random)
        case 3: return comparison(v, \.rating, [-0.0, 0.0, 1.5, 3.75, -3, .nan, .infinity][random.below(7)], &random)
        case 4:
            let prefix = ["n1", "n", "É", "e", "", "n2x"][random.below(6)]
            return PredicateExpressions.build_starts(
                PredicateExpressions.build_KeyPath(root: v, keyPath: \.name), with: PredicateExpressions.build_Arg(prefix))
        case 5:
            let part = ["1", "lan", "", "n2"][random.below(4)]
            return PredicateExpressions.build_contains(
                PredicateExpressions.build_KeyPath(root: v, keyPath: \.name), PredicateExpressions.build_Arg(part))
        case 6:
            let values = (0..<random.below(4)).map { _ in random.below(60) - 10 }
            return PredicateExpressions.build_contains(
                PredicateExpressions.build_Arg(values), PredicateExpressions.build_KeyPath(root: v, keyPath: \.score))
        case 7:
            let low = random.below(50) - 10
            let high = low + random.below(15)
            return PredicateExpressions.build_contains(
                PredicateExpressions.build_ClosedRange(
                    lower: PredicateExpressions.build_Arg(low), upper: PredicateExpressions.build_Arg(high)),
                PredicateExpressions.build_KeyPath(root: v, keyPath: \.score))
        case 8:
            let size: Int? = random.below(3) == 0 ? nil : random.below(8)
            let path = PredicateExpressions.build_KeyPath(root: v, keyPath: \.size)
            if random.below(2) == 0 {
                return PredicateExpressions.build_Equal(lhs: path, rhs: PredicateExpressions.build_Arg(size))
            }
            return PredicateExpressions.build_NotEqual(lhs: path, rhs: PredicateExpressions.build_Arg(size))
        case 9:
            let flag = random.below(2) == 0
            return PredicateExpressions.build_Equal(
                lhs: PredicateExpressions.build_KeyPath(root: v, keyPath: \.flag), rhs: PredicateExpressions.build_Arg(flag))
        case 10:
            let status = Status.allCases[random.below(3)]
            return PredicateExpressions.build_Equal(
                lhs: PredicateExpressions.build_KeyPath(root: v, keyPath: \.category), rhs: PredicateExpressions.build_Arg(status)
            )
        case 11:
            let count = random.below(3)
            return PredicateExpressions.build_Comparison(
                lhs: PredicateExpressions.build_KeyPath(
                    root: PredicateExpressions.build_KeyPath(root: v, keyPath: \.parts), keyPath: \.count),
                rhs: PredicateExpressions.build_Arg(count), op: .greaterThanOrEqual)
        default:
            // Arithmetic on two attributes.
            let sum = PredicateExpressions.build_Arithmetic(
                lhs: PredicateExpressions.build_KeyPath(root: v, keyPath: \.score),
                rhs: PredicateExpressions.build_KeyPath(root: v, keyPath: \.uid), op: .add)
            return PredicateExpressions.build_Comparison(
                lhs: sum, rhs: PredicateExpressions.build_Arg(random.below(400)), op: .lessThan)
        }
    }

    private func comparison<V: Comparable & Codable & Sendable>(
        _ v: Subject, _ path: KeyPath<Gadget, V> & Sendable, _ value: V, _ random: inout SeededRandom
    ) -> BoolExpression {
        let lhs = PredicateExpressions.build_KeyPath(root: v, keyPath: path)
        let rhs = PredicateExpressions.build_Arg(value)
        switch random.below(6) {
        case 0: return PredicateExpressions.build_Equal(lhs: lhs, rhs: rhs)
        case 1: return PredicateExpressions.build_NotEqual(lhs: lhs, rhs: rhs)
        case 2: return PredicateExpressions.build_Comparison(lhs: lhs, rhs: rhs, op: .lessThan)
        case 3: return PredicateExpressions.build_Comparison(lhs: lhs, rhs: rhs, op: .lessThanOrEqual)
        case 4: return PredicateExpressions.build_Comparison(lhs: lhs, rhs: rhs, op: .greaterThan)
        default: return PredicateExpressions.build_Comparison(lhs: lhs, rhs: rhs, op: .greaterThanOrEqual)
        }
    }

    private func and<A: StandardPredicateExpression<Bool>, B: StandardPredicateExpression<Bool>>(_ a: A, _ b: B) -> BoolExpression
    {
        PredicateExpressions.build_Conjunction(lhs: a, rhs: b)
    }

    private func or<A: StandardPredicateExpression<Bool>, B: StandardPredicateExpression<Bool>>(_ a: A, _ b: B) -> BoolExpression
    {
        PredicateExpressions.build_Disjunction(lhs: a, rhs: b)
    }

    private func not<A: StandardPredicateExpression<Bool>>(_ a: A) -> BoolExpression {
        PredicateExpressions.build_Negation(a)
    }

    private func sortOrder(_ random: inout SeededRandom) -> [SortDescriptor<Gadget>] {
        var result: [SortDescriptor<Gadget>] = []
        for _ in 0..<random.below(3) {
            let order: SortOrder = random.below(2) == 0 ? .forward : .reverse
            switch random.below(5) {
            case 0: result.append(SortDescriptor(\.score, order: order))
            case 1: result.append(SortDescriptor(\.name, order: order))
            case 2: result.append(SortDescriptor(\.rating, order: order))
            case 3: result.append(SortDescriptor(\.uid, order: order))
            default: result.append(SortDescriptor(\.size, order: order))
            }
        }
        return result
    }
}

extension SeededRandom {
    fileprivate mutating func below(_ bound: Int) -> Int { bound <= 0 ? 0 : Int(next() % UInt64(bound)) }
}
