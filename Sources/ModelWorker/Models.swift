import Foundation
import Strata

// The shop of the multi-process model test: customers, unique by email,
// with their orders (deleted with them). StrataTests compiles this same
// file (Tests/StrataTests/Models/ShopModels.swift links to it) to open
// the store the workers wrote.

@Model final class Customer {
    #Unique<Customer>([\.email])
    var email: String
    var name: String
    @Relationship(deleteRule: .cascade, inverse: \Order.customer) var orders: [Order] = []

    init(email: String, name: String) {
        self.email = email
        self.name = name
    }
}

@Model final class Order {
    var number: Int
    var writer: Int
    var customer: Customer?

    init(number: Int, writer: Int) {
        self.number = number
        self.writer = writer
    }
}

/// Writer `writer`'s change number `i`, not yet saved: an upsert of the
/// customer of one of twenty emails with a new order, and every tenth
/// time the delete of another email's customer, whose orders go with it.
func makeShopChange(_ i: Int, writer: Int, in context: ModelContext) throws {
    let customer = Customer(email: "c\(i % 20)@example.com", name: "writer\(writer) save \(i)")
    context.insert(customer)
    let order = Order(number: i, writer: writer)
    context.insert(order)
    order.customer = customer
    if i % 10 == 9 {
        let doomed = "c\((i + 7) % 20)@example.com"
        for model in try context.fetch(FetchDescriptor<Customer>(predicate: #Predicate { $0.email == doomed })) {
            context.delete(model)
        }
    }
}
