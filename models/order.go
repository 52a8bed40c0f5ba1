package models

// LegacyOrderDomain is the order domain's saga and resources as histories
// that predate the target op's domain fields need them: the order saga
// (OrderSaga), stock (the legacy initial-stock and stock ops) held by the
// items of approved orders, and money at the gateway held by their totals.
// A newer history carries its own declaration in the target op.
func LegacyOrderDomain() (SagaSpec, []Resource) {
	return OrderSaga, []Resource{
		{Name: LegacyStock, HeldBy: &HeldBy{Items: "/items", Key: "sku", Quantity: "qty"}},
		{Name: "money", Kind: ProviderPayments, Provider: "gateway", Proc: ProcGateway, Charge: FCharge, Refund: FRefund,
			HeldBy: &HeldBy{Quantity: "/total"}},
	}
}

// LegacyStock is the resource name of the legacy stock ops (FInitStock,
// FStockState, FStockSnapshot): histories written before counted
// resources were declared record stock under these.
const LegacyStock = "stock"

func init() { OrderSaga.Normalize() }
